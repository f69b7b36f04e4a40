// Package sparsefile makes disk files whole or not at all: a file is
// created, written (often only its size set, so it is one hole), closed,
// and removed again if any of that fails, so a half-made disk is never
// left behind.
package sparsefile

import "os"

// Create opens path for writing with os.O_CREATE|os.O_WRONLY|flag and mode
// perm (flag os.O_EXCL refuses an existing file, os.O_TRUNC starts one
// over), has fill write it and closes it. When fill or the close fails the
// file is removed. Errors come back as they are, for callers to name the
// file's job: an existing file under os.O_EXCL matches fs.ErrExist.
func Create(path string, flag int, perm os.FileMode, fill func(*os.File) error) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|flag, perm)
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// New creates path as size bytes of hole: Create with a fill that only
// sets the size.
func New(path string, flag int, perm os.FileMode, size int64) error {
	return Create(path, flag, perm, func(f *os.File) error { return f.Truncate(size) })
}
