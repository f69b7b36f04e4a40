package guest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

// A settle, asked by the host over the agent protocol, stops the container
// runtimes and then flushes each disk's file system once, never a share's
// (a share whose daemon died would hang the flush); a runtime that fails to
// stop still gets the flush, and the answer names what failed.
func TestSettleStopsRuntimesThenFlushesDisks(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, os.WriteFile(filepath.Join(s.Root, "proc/self/mountinfo"), []byte(
		"22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"+
			"30 22 254:16 / /mnt/data rw,relatime - ext4 /dev/vdb rw\n"+
			"31 22 254:16 /docker /var/lib/docker rw,relatime - ext4 /dev/vdb rw\n"+
			"45 39 0:38 / /Users/me rw,relatime - virtiofs vmdock0 rw\n"+
			"46 39 0:39 / /tmp/nine rw,relatime - 9p vmdock1 rw\n"), 0o644))
	c, _ := connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	want := "systemctl stop docker.socket docker.service containerd.service\nsync --file-system /\nsync --file-system /mnt/data"
	if got := fos.Ran(); got != want {
		t.Fatalf("ran:\n%s\nwant:\n%s", got, want)
	}

	s, fos = newTestServer(t)
	fos.Results = map[string]error{"systemctl stop": guestostest.ExitErr(1)}
	c, _ = connect(t, s)
	err := c.Settle(ctx)
	if err == nil || !strings.Contains(err.Error(), "stop the container runtimes") {
		t.Fatalf("settle with a failing systemctl: %v, want the failure named", err)
	}
	if !strings.HasSuffix(fos.Ran(), "\nsync --file-system /") {
		t.Fatalf("no sync after the failed stop:\n%s", fos.Ran())
	}
}

// A runtime stop that uses up the whole settle's time (a container whose
// stop timeout is longer than the budget) still leaves the disks flushed:
// the flush runs with time of its own, not with what the stop left.
func TestSettleFlushesAfterAStopThatRanOutOfTime(t *testing.T) {
	s, fos := newTestServer(t)
	slow := &stopOutlastsBudget{FakeOS: fos}
	s.OS = slow
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := s.settle(ctx)
	if err == nil || !strings.Contains(err.Error(), "stop the container runtimes") {
		t.Fatalf("settle after a stop that ran out of time: %v, want the stop's failure named", err)
	}
	if !strings.HasSuffix(fos.Ran(), "\nsync --file-system /") {
		t.Fatalf("no flush after the stop ran out of time:\n%s", fos.Ran())
	}
	if slow.flushCtxErr != nil {
		t.Fatalf("the flush ran with no time left: %v", slow.flushCtxErr)
	}
}

// stopOutlastsBudget is a guest whose systemctl stop takes longer than it
// is given, and which notes whether the flush still had time when it ran.
type stopOutlastsBudget struct {
	*guestostest.FakeOS
	flushCtxErr error
}

func (o *stopOutlastsBudget) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := o.FakeOS.Run(ctx, name, args...)
	switch name {
	case "systemctl":
		<-ctx.Done()
		return nil, ctx.Err()
	case "sync":
		o.flushCtxErr = ctx.Err()
	}
	return out, err
}
