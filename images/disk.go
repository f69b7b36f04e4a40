package images

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/internal/sparsefile"
)

// PrepareDisk makes the instance root disk dst from img, sized to at least
// size bytes. An existing dst holds the guest's data: it is only ever grown,
// never shrunk or replaced. A new dst is a sparse raw copy of the image
// (qcow2 converted on the way), written beside dst and renamed into place,
// so an interrupted copy never looks like a disk.
func PrepareDisk(img *Image, dst string, size int64) error {
	if size < 0 {
		return fmt.Errorf("disk size %d: must not be negative", size)
	}
	if fi, err := os.Stat(dst); err == nil {
		return growDisk(dst, fi.Size(), size)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("prepare disk %s: %w", dst, err)
	}

	return makeDisk(img, dst, size)
}

// RemakeDisk replaces the root disk dst with a fresh copy of img (an
// image upgrade). The new disk is made whole beside dst and renamed over
// it, so a failed copy leaves the old disk as it was.
func RemakeDisk(img *Image, dst string, size int64) error {
	if size < 0 {
		return fmt.Errorf("disk size %d: must not be negative", size)
	}
	if fi, err := os.Stat(dst); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("remake disk %s: not a regular file", dst)
	}
	return makeDisk(img, dst, size)
}

func makeDisk(img *Image, dst string, size int64) error {
	tmp := dst + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("prepare disk %s: %w", dst, err)
	}
	var err error
	switch img.DiskFormat {
	case KindQCOW2:
		err = ConvertQCOW2(img.Disk, tmp)
	case KindRaw, "":
		err = copyRaw(img.Disk, tmp)
	default:
		err = fmt.Errorf("disk format %q not supported (raw, qcow2)", img.DiskFormat)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("prepare disk %s: %w", dst, err)
	}
	fi, err := os.Stat(tmp)
	if err == nil {
		err = growDisk(tmp, fi.Size(), size)
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = atomicfile.Commit(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("prepare disk %s: %w", dst, err)
	}
	return nil
}

// growDisk extends p to size; a smaller size leaves it as it is, since
// shrinking would cut off the guest's file system.
func growDisk(p string, cur, size int64) error {
	if size <= cur {
		if size < cur {
			slog.Info("disk is larger than the requested size; disks only grow", "disk", p, "bytes", cur, "requested", size)
		}
		return nil
	}
	if err := os.Truncate(p, size); err != nil {
		return fmt.Errorf("resize disk %s to %d bytes: %w", p, size, err)
	}
	return nil
}

// copyRaw copies a raw disk, cloning it where the file system can
// (APFS, btrfs, XFS) and otherwise copying only its data.
func copyRaw(src, dst string) error {
	if err := cloneFile(src, dst); err == nil {
		return nil
	}
	os.Remove(dst)
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return sparsefile.Create(dst, os.O_EXCL, 0o600, func(out *os.File) error { return copySparse(out, in) })
}

// EnsureDataDisk makes the data disk at path, for container data, hold
// size bytes: a new one is sparse (the guest formats it on first boot); an
// existing one holds the user's containers and volumes, so it is only ever
// grown, in place and sparsely, and the guest grows its file system online.
func EnsureDataDisk(path string, size int64) error {
	if size <= 0 {
		return fmt.Errorf("data disk size %d: must be positive", size)
	}
	err := sparsefile.New(path, os.O_EXCL, 0o600, size)
	if errors.Is(err, fs.ErrExist) {
		return growDataDisk(path, size)
	}
	if err != nil {
		return fmt.Errorf("create data disk %s: %w", path, err)
	}
	return nil
}

func growDataDisk(path string, size int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("data disk %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("data disk %s is not a regular file", path)
	}
	if err := growDisk(path, fi.Size(), size); err != nil {
		return err
	}
	if size > fi.Size() {
		slog.Info("grew the data disk; the guest grows its file system at boot", "disk", path, "from", fi.Size(), "to", size)
	}
	return nil
}
