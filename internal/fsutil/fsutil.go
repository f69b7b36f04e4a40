// Package fsutil holds the small file checks and reads several packages
// need, so each does not grow its own copy.
package fsutil

import (
	"fmt"
	"io"
	"os"
)

// Exists reports whether anything is at path p (a symlink counts by what
// it points at). An error other than absence, such as a permission
// problem, also reads as false: callers only branch on it.
func Exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// IsFile reports whether p is a regular file (following symlinks).
func IsFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// TooLargeError is ReadFileMax's refusal of a file over its limit.
type TooLargeError struct {
	Path  string
	Limit int64 // bytes
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the file is larger than %d bytes", e.Limit)
}

// ReadFileMax reads the file at path, refusing one larger than limit
// bytes with a *TooLargeError: it never reads more than limit+1 bytes, so
// a mistaken path to a disk image costs no memory. Open and read errors
// are os's, which name the path.
func ReadFileMax(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return b, nil
}
