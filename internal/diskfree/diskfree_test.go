package diskfree

import (
	"path/filepath"
	"testing"
)

func TestBytesOfAPathNotMadeYet(t *testing.T) {
	dir := t.TempDir()
	here, err := Bytes(dir)
	if err != nil || here == 0 {
		t.Fatalf("Bytes(%s) = %d, %v", dir, here, err)
	}
	if _, err := Bytes(filepath.Join(dir, "not", "made", "yet")); err != nil {
		t.Errorf("a path below a missing folder: %v, want its parent's file system", err)
	}
}
