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

// diskGrowth is what the data disk held before a stop, for a start with
// --disk bigger to be checked against.
type diskGrowth struct {
	oldGiB, newGiB int64
	fsBefore       int64
	marker         string
}

// startArgs is the start that grows the disk by 2 GiB.
func (g diskGrowth) startArgs(args []string) []string {
	return append(append([]string(nil), args...), "--disk", strconv.FormatInt(g.newGiB, 10))
}

// prepareDiskGrowth needs a running instance: it writes a marker on the
// data disk and notes the disk's and its file system's size, so the next
// start (the second boot, which also proves the data disk is kept) can
// ask for 2 GiB more.
func prepareDiskGrowth(t *testing.T, e *env) diskGrowth {
	var g diskGrowth
	e.timed("data disk: a marker and the sizes before the stop", func(t *testing.T) {
		fi, err := os.Stat(filepath.Join(e.home, "default", "data.raw"))
		if err != nil {
			t.Fatal(err)
		}
		g.oldGiB = (fi.Size() + gib - 1) / gib
		g.newGiB = g.oldGiB + 2
		g.marker = fmt.Sprintf("grown-%d", time.Now().UnixNano())
		e.run(2*time.Minute, e.vmdock, "ssh", "--", "sh", "-c", "echo "+g.marker+" > "+dataMount+"/grow-marker")
		g.fsBefore = guestFSBytes(t, e)
	})
	return g
}

const gib = int64(1) << 30

// checkDiskGrowth needs the instance running again after g.startArgs: the
// data disk grew, the guest's file system on it grew online by about as
// much, and the marker written before is still there.
func checkDiskGrowth(t *testing.T, e *env, g diskGrowth) {
	e.timed("start --disk bigger grew the data disk and its file system", func(t *testing.T) {
		if g.newGiB == 0 {
			t.Fatal("no sizes from before the stop")
		}
		dataRaw := filepath.Join(e.home, "default", "data.raw")
		if fi, err := os.Stat(dataRaw); err != nil || fi.Size() != g.newGiB*gib {
			t.Fatalf("data.raw after start --disk %d: %v, %v; want %d bytes", g.newGiB, fi.Size(), err, g.newGiB*gib)
		}
		after := guestFSBytes(t, e)
		// ext4 keeps some of the new space for inode tables and group
		// metadata: a few percent of it.
		grown := after - g.fsBefore
		if grown < 2*gib*95/100 || grown > 2*gib {
			t.Errorf("file system on the data disk grew by %d bytes (%d -> %d), want about %d", grown, g.fsBefore, after, 2*gib)
		}
		if out := e.run(2*time.Minute, e.vmdock, "ssh", "--", "cat", dataMount+"/grow-marker"); strings.TrimSpace(out) != g.marker {
			t.Errorf("marker file after growing = %q, want %q", out, g.marker)
		}
		t.Logf("data disk %d -> %d GiB; file system %d -> %d bytes", g.oldGiB, g.newGiB, g.fsBefore, after)
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
