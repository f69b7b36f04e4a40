package images

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// checkFetchedDisk checks a fetched file, at path and hashing to d, before
// it may enter the cache, so nothing that could not boot is ever listed:
// a qcow2 must stand alone, a raw disk needs a partition table, and a
// vmdock archive must unpack to its layout within imageLimits and, when
// arch is not "", be for arch. It returns the archive's arch, from its
// manifest ("" for a disk, which does not say).
//
// The vmdock check is the unpack itself, into a folder under tmp/; the
// returned settle takes the result of committing the blob and, when that
// worked, moves the unpacked files to d's unpack folder, so the first
// start does not decompress the image again. It always removes what the
// check left in tmp/, and must be called once the check passed.
func (c *Cache) checkFetchedDisk(path string, d Digest, arch string) (imgArch string, settle func(commitErr error) error, err error) {
	kind, err := sniffKind(path)
	if err != nil {
		return "", nil, err
	}
	switch kind {
	case KindQCOW2:
		return "", settleNothing, checkQCOW2File(path)
	case KindRaw:
		return "", settleNothing, checkRawFile(path)
	}
	staged, err := os.MkdirTemp(filepath.Join(c.Dir, "tmp"), "unpack-")
	if err != nil {
		return "", nil, fmt.Errorf("unpack image: %w", err)
	}
	m, err := unpackVMDockFile(path, staged)
	if err == nil {
		err = checkManifestArch(m, arch)
	}
	if err != nil {
		os.RemoveAll(staged)
		return "", nil, err
	}
	return m.Arch, func(commitErr error) error {
		defer os.RemoveAll(staged) // a no-op after the rename
		if commitErr != nil {
			return commitErr
		}
		if err := c.placeUnpacked(staged, c.unpackDir(d)); err != nil {
			// The blob is in and checked; the first start unpacks it again.
			slog.Warn("keeping the unpacked image failed; it will be unpacked on first use", "digest", d.String(), "err", err)
		}
		return nil
	}, nil
}

// commitBlob moves a checked file into blobs/, where it is listed; a
// variable so a test can tell that a refused file never got this far.
var commitBlob = atomicfile.Commit

func settleNothing(commitErr error) error { return commitErr }

// placeUnpacked moves a fresh unpack to dir, unless dir already holds an
// intact unpack of the same bytes, which an instance may be reading.
func (c *Cache) placeUnpacked(staged, dir string) error {
	if _, err := checkUnpacked(dir); err == nil {
		return nil
	}
	return atomicfile.SwapDir(staged, dir)
}

func unpackVMDockFile(path, dir string) (*Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return unpackVMDock(f, dir, imageLimits)
}

// withFile calls check on the file at path and its size.
func withFile(path string, check func(f *os.File, size int64) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return check(f, fi.Size())
}

func checkRawFile(path string) error {
	return withFile(path, func(f *os.File, size int64) error { return checkRawDisk(f, size) })
}

// checkQCOW2File refuses a qcow2 image vmdock would not boot.
func checkQCOW2File(path string) error {
	err := withFile(path, func(f *os.File, size int64) error {
		_, err := openQCOW2(f, size)
		return err
	})
	if errors.Is(err, ErrUnsafeImage) || errors.Is(err, ErrEncryptedImage) {
		err = fmt.Errorf("%w (make a standalone, unencrypted copy with `qemu-img convert -O qcow2 <in> <out>` and import that)", err)
	}
	return err
}
