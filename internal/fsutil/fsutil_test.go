package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExistsAndIsFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "gone"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path           string
		exists, isFile bool
	}{
		{file, true, true},
		{link, true, true},
		{dir, true, false},
		{dangling, false, false},
		{filepath.Join(dir, "gone"), false, false},
	} {
		if got := Exists(tc.path); got != tc.exists {
			t.Errorf("Exists(%s) = %v, want %v", tc.path, got, tc.exists)
		}
		if got := IsFile(tc.path); got != tc.isFile {
			t.Errorf("IsFile(%s) = %v, want %v", tc.path, got, tc.isFile)
		}
	}
}

func TestReadFileMax(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFileMax(p, 5); err != nil || string(b) != "12345" {
		t.Errorf("ReadFileMax at the limit = %q, %v; want the whole file", b, err)
	}
	_, err := ReadFileMax(p, 4)
	var big *TooLargeError
	if !errors.As(err, &big) || big.Limit != 4 || big.Path != p || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Errorf("ReadFileMax over the limit: %v, want a TooLargeError for 4 bytes", err)
	}
	if _, err := ReadFileMax(filepath.Join(dir, "gone"), 4); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFileMax of a missing file: %v, want ErrNotExist", err)
	}
}
