package probe

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInstallUnpacksAndReadsTheTree(t *testing.T) {
	dir := t.TempDir()
	tarball := filepath.Join(dir, "deps.tar")
	if err := MakeTarball(tarball, 120, 7); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "app")
	it, err := Install(tarball, target)
	if err != nil {
		t.Fatal(err)
	}
	if it.Files != 120 || it.Unpack <= 0 || it.Read <= 0 {
		t.Fatalf("install times %+v", it)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("install left %s behind: %v", target, err)
	}
	if _, err := Install(tarball, dir); err == nil {
		t.Fatal("install into an existing folder accepted")
	}
}
