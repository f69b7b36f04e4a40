//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// share is one mount as the e2e configured it: the type the guest must
// use, after "its own type, else mountType".
type share struct{ hostPath, guestPath, fsType string }

// checkShareTypes runs on the booted instance: `vmdock status` lists every
// mount with its resolved type and mode, and the guest has each one
// mounted at its guest path with that file system, writable.
func checkShareTypes(t *testing.T, e *env, shares []share) {
	e.timed("status and the guest agree on each share's type", func(t *testing.T) {
		status := e.run(time.Minute, e.vmdock, "status")
		mounts := e.run(2*time.Minute, e.vmdock, "ssh", "--", "cat", "/proc/mounts")
		for _, sh := range shares {
			want := fmt.Sprintf("%s -> %s (%s, rw)", sh.hostPath, sh.guestPath, sh.fsType)
			if !strings.Contains(status, want) {
				t.Errorf("status lacks %q:\n%s", want, status)
			}
			if fs, opts, ok := guestMount(mounts, sh.guestPath); !ok || fs != sh.fsType || !strings.HasPrefix(opts, "rw") {
				t.Errorf("guest mount at %s: type %q, options %q, found %v; want %s, rw", sh.guestPath, fs, opts, ok, sh.fsType)
			}
		}
	})
}

// guestMount finds the file system type and options of the mount at dir
// in /proc/mounts text, where spaces in paths are written \040.
func guestMount(procMounts, dir string) (fsType, opts string, ok bool) {
	escaped := strings.ReplaceAll(dir, " ", `\040`)
	for _, line := range strings.Split(procMounts, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] == escaped {
			return f[2], f[3], true
		}
	}
	return "", "", false
}
