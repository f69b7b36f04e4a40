package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// SwapDir puts the finished folder tmp in dst's place: dst and all in it
// is removed, tmp renamed to dst, and the parent folder fsynced so the
// rename survives a crash. tmp must be on dst's file system (a sibling).
// Between the removal and the rename dst is missing, so it is for folders
// that are rebuilt when missing (caches, generated trees). A tmp that is
// not a folder leaves dst untouched.
func SwapDir(tmp, dst string) error {
	if fi, err := os.Stat(tmp); err != nil || !fi.IsDir() {
		if err == nil {
			err = fmt.Errorf("%s is not a folder", tmp)
		}
		return fmt.Errorf("swap folder %s: %w", dst, err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("swap folder %s: %w", dst, err)
	}
	return PlaceDir(tmp, dst)
}

// PlaceDir renames the finished folder tmp to dst, which must be missing
// (or an empty folder), and fsyncs the parent: when two processes build
// the same folder, the first one placed wins and the other gets an error,
// never replacing a folder that may be in use.
func PlaceDir(tmp, dst string) error {
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("place folder %s: %w", dst, err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("place folder %s: %w", dst, err)
	}
	return nil
}
