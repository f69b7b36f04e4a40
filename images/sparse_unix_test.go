//go:build linux || darwin

package images

import (
	"testing"

	"golang.org/x/sys/unix"
)

// allocated is the space a file takes on disk, which is less than its
// size when it has holes.
func allocated(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}
