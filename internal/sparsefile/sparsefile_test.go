package sparsefile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestNew(t *testing.T) {
	p := filepath.Join(t.TempDir(), "disk")
	if err := New(p, os.O_EXCL, 0o600, 1<<20); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 1<<20 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("size %d mode %v, want %d 0600", fi.Size(), fi.Mode().Perm(), 1<<20)
	}
	if err := New(p, os.O_EXCL, 0o600, 1); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second New with O_EXCL: %v, want fs.ErrExist", err)
	}
	if fi, _ := os.Stat(p); fi.Size() != 1<<20 {
		t.Fatalf("refused New changed the file: size %d", fi.Size())
	}
	if err := New(p, os.O_TRUNC, 0o600, 4096); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Size() != 4096 {
		t.Fatalf("New with O_TRUNC: size %d, want 4096", fi.Size())
	}
}

func TestCreateRemovesOnFailure(t *testing.T) {
	p := filepath.Join(t.TempDir(), "disk")
	boom := errors.New("boom")
	err := Create(p, os.O_EXCL, 0o644, func(f *os.File) error {
		if _, err := f.Write([]byte("half")); err != nil {
			t.Fatal(err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Create: %v, want the fill's error", err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed Create left the file: %v", err)
	}
	if err := New(p, os.O_EXCL, 0o600, -1); err == nil {
		t.Fatal("New with a negative size succeeded")
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed New left the file: %v", err)
	}
}

// A disk that is mostly hole takes only its written part on the host.
func TestAllocated(t *testing.T) {
	p := filepath.Join(t.TempDir(), "disk")
	const size, written = 64 << 20, 1 << 20
	err := Create(p, os.O_EXCL, 0o600, func(f *os.File) error {
		if err := f.Truncate(size); err != nil {
			return err
		}
		// Not zeros, which a compressing file system keeps as a hole.
		_, err := f.WriteAt(bytes.Repeat([]byte{1}, written), 8<<20)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := Allocated(fi)
	// A file system allocates in blocks (and may add metadata blocks):
	// what was written, give or take a little, never the whole size.
	if !ok || got < written || got > written+1<<20 || fi.Size() != size {
		t.Errorf("size %d, allocated %d (%v); want %d with about %d allocated", fi.Size(), got, ok, size, written)
	}
}
