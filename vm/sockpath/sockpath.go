// Package sockpath checks unix socket paths against the OS's limit before
// anything binds them: a path that does not fit fails late and obscurely
// (EINVAL from bind, QEMU refusing its -chardev), while the fix, a
// shorter VMDOCK_HOME, is the same for every socket.
package sockpath

import "fmt"

// Max is the longest socket path this OS takes: sun_path holds sunPath
// bytes, the last of them the path's NUL (C programs such as QEMU need it,
// and macOS's bind refuses a path without it).
const Max = sunPath - 1

// Check returns an error naming the first path longer than max bytes, its
// length and the limit, in one line; nil when all fit.
func Check(max int, paths ...string) error {
	for _, p := range paths {
		if len(p) > max {
			return fmt.Errorf("socket path %s is %d bytes, longer than the %d a unix socket path may have on this OS: set VMDOCK_HOME to a shorter folder (or use a shorter profile name)",
				p, len(p), max)
		}
	}
	return nil
}
