// Package diskfree tells how many bytes a file system has free for an
// unprivileged writer.
package diskfree

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Bytes is the space available to unprivileged users on the file system
// of path, or of its nearest existing parent: a folder about to be made
// lands on that file system.
func Bytes(path string) (uint64, error) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			return uint64(st.Bavail) * uint64(st.Bsize), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || p == filepath.Dir(p) {
			return 0, fmt.Errorf("free space of %s: %w", p, err)
		}
	}
}
