package disks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The root grows when it is ext4 on a block device; anything else is an
// error that names what the root is.
func TestGrowRoot(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, s.GrowRoot(context.Background()))
	if got := fos.Ran(); got != "resize2fs /dev/vda" {
		t.Fatalf("ran %q, want resize2fs on the root's device", got)
	}
	for table, want := range map[string]string{
		"22 1 0:20 / / rw - overlay overlay rw\n":     "no block device mounted at /",
		"22 1 254:0 / / rw - xfs /dev/vda rw\n":       "root filesystem is xfs, only ext4 grows",
		"22 1 254:0 / /other rw - ext4 /dev/vda rw\n": "no block device mounted at /",
	} {
		s, _ := newTestServer(t)
		must(t, os.WriteFile(filepath.Join(s.Root, "proc/self/mountinfo"), []byte(table), 0o644))
		if err := s.GrowRoot(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("root %q: %v, want %q", table, err, want)
		}
	}
}
