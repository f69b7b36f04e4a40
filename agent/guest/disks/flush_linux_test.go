package disks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

// Flush syncs each disk's file system once, never a share's (a share whose
// daemon died would hang it), and names each disk that failed while still
// flushing the others.
func TestFlushEachDiskOnceNeverAShare(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, os.WriteFile(s.Path("/proc/self/mountinfo"), []byte(
		"22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"+
			"30 22 254:16 / /mnt/data rw,relatime - ext4 /dev/vdb rw\n"+
			"31 22 254:16 /docker /var/lib/docker rw,relatime - ext4 /dev/vdb rw\n"+
			"45 39 0:38 / /Users/me rw,relatime - virtiofs vmdock0 rw\n"+
			"46 39 0:39 / /tmp/nine rw,relatime - 9p vmdock1 rw\n"), 0o644))
	must(t, s.Flush(context.Background()))
	if got, want := fos.Ran(), "sync --file-system /\nsync --file-system /mnt/data"; got != want {
		t.Fatalf("ran:\n%s\nwant:\n%s", got, want)
	}

	fos.Results = map[string]error{"sync --file-system /": guestostest.ExitErr(1)}
	err := s.Flush(context.Background())
	if err == nil || !strings.Contains(err.Error(), "flush /:") || !strings.Contains(err.Error(), "flush /mnt/data:") {
		t.Fatalf("flush with a failing sync: %v, want each disk named", err)
	}

	must(t, os.Remove(filepath.Join(s.Root, "proc/self/mountinfo")))
	if err := s.Flush(context.Background()); err == nil {
		t.Fatal("flush without a mount table: want an error")
	}
}
