//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/bench"
)

// checkBenchSync needs a running qemu instance. `vmdock bench --sections
// sync --quick` must hot-plug one scratch disk per --disk-sync mode into
// this VM, report one 4k write+fsync row per mode (none first, the
// baseline), and leave nothing behind: no scratch disk in the guest, no
// scratch file in the instance folder. The database-shaped row needs the
// guest helper and a writable share; when the helper is absent the bench
// says so and only that row is missing.
func checkBenchSync(t *testing.T, e *env) {
	e.timed("bench sync: the disk-sync modes side by side in one boot", func(t *testing.T) {
		out := filepath.Join(e.work, "bench-sync.json")
		e.run(10*time.Minute, e.vmdock, "bench", "--sections", "sync", "--quick", "--json", out)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var rep bench.Report
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		rows := map[string][]string{}
		for _, r := range rep.Results {
			if r.Section != "sync" {
				continue
			}
			if r.Value <= 0 || r.Ratio <= 0 {
				t.Errorf("row %s / %s: value %g ratio %g", r.Metric, r.Variant, r.Value, r.Ratio)
			}
			rows[r.Metric] = append(rows[r.Metric], r.Variant)
		}
		want := "disk-sync none,disk-sync fsync,disk-sync full"
		if got := strings.Join(rows[bench.MetricSyncWrite], ","); got != want {
			t.Errorf("%s rows %q, want %q; skipped: %q", bench.MetricSyncWrite, got, want, rep.Skipped)
		}
		helperMissing := false
		for _, s := range rep.Skipped {
			helperMissing = helperMissing || strings.Contains(s, "needs the guest helper")
			if strings.HasPrefix(s, "sync") && !strings.Contains(s, "needs the guest helper") {
				t.Errorf("skipped: %s", s)
			}
		}
		if got := strings.Join(rows[bench.MetricSyncCommit], ","); got != want && !helperMissing {
			t.Errorf("%s rows %q, want %q", bench.MetricSyncCommit, got, want)
		}
		if left, _ := filepath.Glob(filepath.Join(e.instDir(), "scratch*.raw")); len(left) > 0 {
			t.Errorf("scratch files left in the instance folder: %q", left)
		}
		serials := e.run(2*time.Minute, e.vmdock, "ssh", "--", "sh", "-c", "cat /sys/block/*/serial 2>/dev/null; echo; mount")
		if strings.Contains(serials, "vmdock-scratch") || strings.Contains(serials, "vmdock-bench-sync") {
			t.Errorf("a scratch disk is still in the guest:\n%s", serials)
		}
	})
}
