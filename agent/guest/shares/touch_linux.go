package shares

import (
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// maxTouch bounds one touch request: the host batches a burst of edits.
const maxTouch = 4096

// Touch sets each path's times to what they already are. The change is a
// no-op for the file, but it goes through the guest's VFS, which raises an
// inotify event (IN_ATTRIB) for watchers in containers; host edits that
// arrive over virtiofs or 9p raise none. Paths that are gone are skipped:
// their folder is in the list too.
func (s *Shares) Touch(paths []string) error {
	if len(paths) > maxTouch {
		return fmt.Errorf("touch: %d paths; accepted: at most %d per request", len(paths), maxTouch)
	}
	for _, p := range paths {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return fmt.Errorf("touch: %q is not a clean absolute path", p)
		}
	}
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Lstat(s.Path(p), &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			continue
		}
		ts := []unix.Timespec{st.Atim, st.Mtim}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, s.Path(p), ts, unix.AT_SYMLINK_NOFOLLOW); err != nil && !os.IsNotExist(err) {
			s.Logger().Debug("touch", "path", p, "err", err)
		}
	}
	return nil
}
