package guest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A virtiofs share whose daemon died has its FUSE connection ended
// through fusectl (named by the mount's device number); a 9p share or a
// path with no mount is refused and nothing is written for it.
func TestAbortSharesEndsTheVirtiofsConnection(t *testing.T) {
	s, _ := newTestServer(t)
	root := s.Root
	must(t, os.MkdirAll(filepath.Join(root, "proc", "self"), 0o755))
	mountinfo := "22 1 254:0 / / rw - ext4 /dev/vda rw\n" +
		"95 22 0:58 / /home/me/my\\040project rw,relatime - virtiofs mount0 rw\n" +
		"96 22 0:59 / /srv/nine rw - 9p mount1 rw\n"
	must(t, os.WriteFile(filepath.Join(root, "proc", "self", "mountinfo"), []byte(mountinfo), 0o644))
	for _, c := range []string{"58", "59"} {
		must(t, os.MkdirAll(filepath.Join(root, "sys", "fs", "fuse", "connections", c), 0o755))
	}

	err := s.abortShares([]string{"/home/me/my project", "/srv/nine", "/nothing"})
	if b, _ := os.ReadFile(filepath.Join(root, "sys", "fs", "fuse", "connections", "58", "abort")); string(b) != "1" {
		t.Errorf("abort of the virtiofs share's connection: %q, want 1", b)
	}
	if _, err := os.Stat(filepath.Join(root, "sys", "fs", "fuse", "connections", "59", "abort")); err == nil {
		t.Error("the 9p share's connection was written to")
	}
	if err == nil || !strings.Contains(err.Error(), "/srv/nine: no virtiofs mount") || !strings.Contains(err.Error(), "/nothing: no virtiofs mount") {
		t.Errorf("abortShares: %v, want the 9p share and the missing one named", err)
	}
	if got := fuseConnName("8:3"); got != "8388611" {
		t.Errorf("fuseConnName(8:3) = %q, want the kernel's dev_t 8<<20|3", got)
	}
}
