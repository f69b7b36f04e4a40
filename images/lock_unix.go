//go:build linux || darwin

package images

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lock takes the cache's exclusive lock, so two instances starting at once
// do not unpack over each other and prune does not remove an image being
// prepared. The kernel drops it if the process dies.
func (c *Cache) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(c.Dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock image cache: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock image cache: %w", err)
	}
	return func() { f.Close() }, nil
}
