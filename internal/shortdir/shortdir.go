// Package shortdir gives tests a folder short enough to bind unix sockets
// in on every OS. t.TempDir() is under TMPDIR, which on macOS is a
// /var/folders/…/T/ of about 49 bytes; with the test's name on top, a
// socket path there passes macOS's 104-byte sun_path. Every test that
// binds a socket takes its folder from here.
package shortdir

import (
	"os"
	"testing"
)

// root is short and exists on Linux and macOS (where it is a link to
// /private/tmp), whatever TMPDIR says.
const root = "/tmp"

// New makes a folder like /tmp/vd123456789, removed when t ends.
func New(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(root, "vd")
	if err != nil {
		t.Fatalf("a short folder for unix sockets under %s: %v", root, err)
	}
	t.Cleanup(func() {
		// Tests leave read-only folders behind at times; RemoveAll needs
		// write permission to empty them.
		_ = makeWritable(dir)
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir
}
