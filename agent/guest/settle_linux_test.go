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
