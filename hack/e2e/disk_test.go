//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dataMount is where the guest agent mounts the data disk.
const dataMount = "/var/lib/vmdock-data"

// checkDiskGrowth needs a running instance started with startArgs. It
// restarts it with --disk 2 GiB bigger than the data disk is now and checks
// that data.raw grew, that the guest's file system on it grew online by
// about as much, and that a file written before is still there. It leaves
// the instance running with the bigger disk.
func checkDiskGrowth(t *testing.T, e *env, startArgs []string) {
	e.timed("start --disk bigger grows the data disk and its file system", func(t *testing.T) {
		dataRaw := filepath.Join(e.home, "default", "data.raw")
		fi, err := os.Stat(dataRaw)
		if err != nil {
			t.Fatal(err)
		}
		const gib = int64(1) << 30
		oldGiB := (fi.Size() + gib - 1) / gib
		newGiB := oldGiB + 2
		marker := fmt.Sprintf("grown-%d", time.Now().UnixNano())
		e.run(2*time.Minute, e.vmdock, "ssh", "--", "sh", "-c", "echo "+marker+" > "+dataMount+"/grow-marker")
		before := guestFSBytes(t, e)

		e.run(5*time.Minute, e.vmdock, "stop")
		e.run(15*time.Minute, e.vmdock, append(append([]string(nil), startArgs...), "--disk", strconv.FormatInt(newGiB, 10))...)

		if fi, err := os.Stat(dataRaw); err != nil || fi.Size() != newGiB*gib {
			t.Fatalf("data.raw after start --disk %d: %v, %v; want %d bytes", newGiB, fi.Size(), err, newGiB*gib)
		}
		after := guestFSBytes(t, e)
		// ext4 keeps some of the new space for inode tables and group
		// metadata: a few percent of it.
		grown := after - before
		if grown < 2*gib*95/100 || grown > 2*gib {
			t.Errorf("file system on the data disk grew by %d bytes (%d -> %d), want about %d", grown, before, after, 2*gib)
		}
		if out := e.run(2*time.Minute, e.vmdock, "ssh", "--", "cat", dataMount+"/grow-marker"); strings.TrimSpace(out) != marker {
			t.Errorf("marker file after growing = %q, want %q", out, marker)
		}
		t.Logf("data disk %d -> %d GiB; file system %d -> %d bytes", oldGiB, newGiB, before, after)
	})
}

// guestFSBytes is the size of the data disk's file system per df in the guest.
func guestFSBytes(t *testing.T, e *env) int64 {
	t.Helper()
	out := e.run(2*time.Minute, e.vmdock, "ssh", "--", "df", "-B1", "--output=size", dataMount)
	lines := strings.Fields(out)
	if len(lines) < 2 {
		t.Fatalf("df -B1 %s: %q", dataMount, out)
	}
	n, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		t.Fatalf("df -B1 %s: %q: %v", dataMount, out, err)
	}
	return n
}
