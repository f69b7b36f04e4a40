package disks

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

// fakeExt4 writes a file of size bytes whose superblock says blocks blocks
// of 1 KiB << logBlock, with the high word and the 64bit feature as given.
func fakeExt4(t *testing.T, path string, size int64, logBlock, blocksLo, blocksHi uint32, is64 bool) {
	t.Helper()
	sb := make([]byte, ext4SuperSize)
	le := binary.LittleEndian
	le.PutUint16(sb[ext4Magic:], ext4MagicValue)
	le.PutUint32(sb[ext4LogBlockSize:], logBlock)
	le.PutUint32(sb[ext4BlocksCountLo:], blocksLo)
	le.PutUint32(sb[ext4BlocksCountHi:], blocksHi)
	if is64 {
		le.PutUint32(sb[ext4FeatureIncompat:], ext4Incompat64Bit)
	}
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	_, err = f.WriteAt(sb, ext4SuperOffset)
	must(t, err)
	must(t, f.Truncate(size))
}

func TestExt4Room(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "disk")
	for _, tc := range []struct {
		name             string
		size             int64
		logBlock, lo, hi uint32
		is64             bool
		want             int64
	}{
		{"fills its device", 64 << 20, 2, 16384, 0, false, 0},
		{"device grew by 32 MiB", 96 << 20, 2, 16384, 0, false, 32 << 20},
		{"less than a block more is no room", 64<<20 + 4095, 2, 16384, 0, false, 0},
		{"1 KiB blocks", 8 << 20, 0, 4096, 0, false, 4 << 20},
		// The high word counts only with the 64bit feature: with it the
		// file system is bigger than this device, without it 16 MiB smaller.
		{"high word without 64bit ignored", 80 << 20, 2, 16384, 1, false, 16 << 20},
		{"high word with 64bit counted", 80 << 20, 2, 16384, 1, true, 0},
	} {
		fakeExt4(t, p, tc.size, tc.logBlock, tc.lo, tc.hi, tc.is64)
		got, err := ext4Room(p)
		if err != nil || got != tc.want {
			t.Errorf("%s: ext4Room = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}

	must(t, os.WriteFile(p, make([]byte, 4096), 0o644))
	if _, err := ext4Room(p); err == nil {
		t.Error("a device without an ext4 magic has a size")
	}
	fakeExt4(t, p, 64<<20, 7, 16384, 0, false)
	if _, err := ext4Room(p); err == nil {
		t.Error("a block size of 128 KiB was taken")
	}
	if _, err := ext4Room(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing device has a size")
	}
}

// resize2fs runs only when the device has room beyond the file system,
// and whenever the superblock cannot be read.
func TestResizeIfGrown(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, os.MkdirAll(filepath.Join(s.Root, "dev"), 0o755))
	dev := filepath.Join(s.Root, "dev/vdb")

	fakeExt4(t, dev, 64<<20, 2, 16384, 0, false)
	must(t, s.resizeIfGrown(context.Background(), "/dev/vdb"))
	if got := fos.Ran(); got != "" {
		t.Fatalf("a file system that fills its device ran %q", got)
	}

	must(t, os.Truncate(dev, 128<<20))
	must(t, s.resizeIfGrown(context.Background(), "/dev/vdb"))
	if got := fos.Ran(); got != "resize2fs /dev/vdb" {
		t.Fatalf("a grown device ran %q, want resize2fs", got)
	}

	s, fos = newTestServer(t)
	must(t, s.resizeIfGrown(context.Background(), "/dev/vdb")) // no such device here
	if got := fos.Ran(); got != "resize2fs /dev/vdb" {
		t.Fatalf("an unreadable superblock ran %q, want resize2fs as before", got)
	}
	fos.Results = map[string]error{"resize2fs": guestostest.ExitErr(1)}
	if err := s.resizeIfGrown(context.Background(), "/dev/vdb"); err == nil {
		t.Error("a failing resize2fs was not reported")
	}
}

// The real tools agree: mkfs.ext4's superblock fills the image, and after
// the image grows the room is exactly the growth.
func TestExt4RoomRealExt4(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("mkfs.ext4 not installed (e2fsprogs)")
	}
	img := filepath.Join(t.TempDir(), "data.raw")
	must(t, os.WriteFile(img, nil, 0o600))
	must(t, os.Truncate(img, 64<<20))
	for _, opts := range [][]string{{"-O", "^64bit"}, {"-O", "64bit"}} {
		args := append(append([]string{"-q", "-F"}, opts...), img)
		if out, err := exec.Command("mkfs.ext4", args...).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4 %v: %v\n%s", opts, err, out)
		}
		if room, err := ext4Room(img); err != nil || room != 0 {
			t.Fatalf("%v: fresh file system: room %d, %v; want 0", opts, room, err)
		}
		must(t, os.Truncate(img, 96<<20))
		if room, err := ext4Room(img); err != nil || room != 32<<20 {
			t.Fatalf("%v: grown image: room %d, %v; want %d", opts, room, err, 32<<20)
		}
		must(t, os.Truncate(img, 64<<20))
	}
}

// A data disk whose ext4 superblock reads is neither probed with blkid nor
// formatted; one without is probed, and formatted when blkid finds nothing.
func TestFormatIfBlank(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, os.MkdirAll(filepath.Join(s.Root, "dev"), 0o755))
	dev := filepath.Join(s.Root, "dev/vdb")
	fakeExt4(t, dev, 64<<20, 2, 16384, 0, false)
	must(t, s.formatIfBlank(context.Background(), "/dev/vdb"))
	if got := fos.Ran(); got != "" {
		t.Fatalf("an ext4 disk ran %q", got)
	}

	must(t, os.WriteFile(dev, make([]byte, 8192), 0o644))
	fos.Results = map[string]error{"blkid": guestostest.ExitErr(2)}
	must(t, s.formatIfBlank(context.Background(), "/dev/vdb"))
	if got := fos.Ran(); got != "blkid -o value -s TYPE /dev/vdb\nmkfs.ext4 -q -E lazy_itable_init=0 -L vmdock-data /dev/vdb" {
		t.Fatalf("a blank disk ran %q", got)
	}

	fos.Cmds = nil
	fos.Results = nil // blkid finds another file system: left alone
	must(t, s.formatIfBlank(context.Background(), "/dev/vdb"))
	if got := fos.Ran(); got != "blkid -o value -s TYPE /dev/vdb" {
		t.Fatalf("a disk with another signature ran %q", got)
	}
	fos.Results = map[string]error{"blkid": guestostest.ExitErr(4)}
	if err := s.formatIfBlank(context.Background(), "/dev/vdb"); err == nil {
		t.Error("a failing blkid was not reported")
	}
}
