package images

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPrepareDiskRawGrowOnly(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "image.raw")
	if err := os.WriteFile(src, fakeDisk(), 0o644); err != nil {
		t.Fatal(err)
	}
	img := &Image{Disk: src, DiskFormat: KindRaw}
	dst := filepath.Join(dir, "disk.raw")

	steps := []struct {
		name     string
		size     int64
		wantSize int64
	}{
		{"create and grow", 8 << 20, 8 << 20},
		{"never shrink", 1 << 20, 8 << 20},
		{"grow existing", 16 << 20, 16 << 20},
	}
	for i, s := range steps {
		if err := PrepareDisk(img, dst, s.size); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if i == 0 {
			// Guest data written after the first boot must survive later calls.
			f, err := os.OpenFile(dst, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte("guest data"), 5<<20)
			f.Close()
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != s.wantSize {
			t.Errorf("%s: size %d, want %d", s.name, len(got), s.wantSize)
		}
		if !bytes.Equal(got[:4<<20], fakeDisk()) {
			t.Errorf("%s: image content lost", s.name)
		}
		if !bytes.Equal(got[5<<20:5<<20+10], []byte("guest data")) {
			t.Errorf("%s: guest data lost", s.name)
		}
	}
	if alloc := allocated(t, dst); alloc >= 2<<20 {
		t.Errorf("disk has %d bytes allocated, want a sparse copy", alloc)
	}
	if _, err := os.Stat(dst + ".tmp"); !os.IsNotExist(err) {
		t.Error("temp disk left behind")
	}
}

func TestPrepareDiskQCOW2(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	src := makeQCOW2(t, dir, "img.qcow2", "")
	dst := filepath.Join(dir, "disk.raw")
	if err := PrepareDisk(&Image{Disk: src, DiskFormat: KindQCOW2}, dst, 20<<20); err != nil {
		t.Fatal(err)
	}
	// The grown tail reads as zeros, so the raw disk still matches the image.
	run(t, "qemu-img", "compare", "-q", "-f", "raw", "-F", "qcow2", dst, src)
	if fi, _ := os.Stat(dst); fi.Size() != 20<<20 {
		t.Errorf("size %d, want %d", fi.Size(), 20<<20)
	}
}

func TestPrepareDiskBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		img  *Image
		size int64
		want string
	}{
		{"negative size", &Image{Disk: "x"}, -1, "must not be negative"},
		{"unknown format", &Image{Disk: "x", DiskFormat: "vmdk"}, 1, `disk format "vmdk" not supported`},
		{"missing image", &Image{Disk: filepath.Join(dir, "nope"), DiskFormat: KindRaw}, 1, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := filepath.Join(dir, "disk.raw")
			err := PrepareDisk(tt.img, dst, tt.size)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
			if _, err := os.Stat(dst); !os.IsNotExist(err) {
				t.Error("failed PrepareDisk left a disk")
			}
		})
	}
}

func TestEnsureDataDisk(t *testing.T) {
	p := filepath.Join(t.TempDir(), "data.raw")
	if err := EnsureDataDisk(p, 0); err == nil {
		t.Error("size 0 accepted")
	}
	if err := EnsureDataDisk(p, 64<<20); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != 64<<20 {
		t.Fatalf("stat = %v, %v", fi, err)
	}
	if alloc := allocated(t, p); alloc != 0 {
		t.Errorf("new data disk has %d bytes allocated, want none", alloc)
	}
}

// A bigger --disk grows the existing data disk in place and sparsely; the
// user's data stays, and a smaller or equal size leaves the file untouched.
func TestEnsureDataDiskGrowsOnly(t *testing.T) {
	p := filepath.Join(t.TempDir(), "data.raw")
	if err := EnsureDataDisk(p, 64<<20); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("volumes"), 0)
	f.WriteAt([]byte("tail"), 64<<20-4)
	f.Close()
	before := allocated(t, p)

	if err := EnsureDataDisk(p, 128<<20); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 128<<20 {
		t.Fatalf("size %d after growing, want %d", len(b), 128<<20)
	}
	if string(b[:7]) != "volumes" || string(b[64<<20-4:64<<20]) != "tail" {
		t.Error("data lost when growing")
	}
	if !bytes.Equal(b[64<<20:], make([]byte, 64<<20)) {
		t.Error("grown tail is not zeros")
	}
	if alloc := allocated(t, p); alloc > before {
		t.Errorf("growing allocated %d more bytes, want a sparse tail", alloc-before)
	}

	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, size := range []int64{128 << 20, 32 << 20} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		if err := EnsureDataDisk(p, size); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != 128<<20 || !fi.ModTime().Equal(old) {
			t.Errorf("size %d: disk touched (size %d, mtime %v)", size, fi.Size(), fi.ModTime())
		}
	}
}

func TestEnsureDataDiskNotAFile(t *testing.T) {
	dir := t.TempDir()
	if err := EnsureDataDisk(dir, 1<<20); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("err = %v, want a not-a-regular-file error", err)
	}
}
