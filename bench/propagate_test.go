package bench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/bench/probe"
)

// delayedShare is a "guest" whose share shows host writes only after a
// delay (and the guest's writes to the host after another): the section
// must report about those delays, with its channel's own round trip taken
// off.
type delayedShare struct {
	toGuest, toHost time.Duration
}

func (d delayedShare) exec(_ context.Context, argv []string, in io.Reader, out, _ io.Writer) (int, error) {
	if len(argv) < 2 || argv[1] != "files" {
		return 0, nil
	}
	pr, pw := io.Pipe()
	go func() {
		// Delay each request as the share would: an await sees the file
		// toGuest late, a write reaches the host toHost late.
		buf := make([]byte, 0, 256)
		one := make([]byte, 1)
		for {
			if _, err := in.Read(one); err != nil {
				pw.Close()
				return
			}
			buf = append(buf, one[0])
			if one[0] != '\n' {
				continue
			}
			line := string(buf)
			buf = buf[:0]
			switch {
			case strings.HasPrefix(line, "await ") && strings.Contains(line, "propagate/"):
				time.Sleep(d.toGuest)
			case strings.HasPrefix(line, "write ") && strings.Contains(line, "propagate/"):
				time.Sleep(d.toHost)
			}
			pw.Write([]byte(line))
		}
	}()
	if err := probe.ServeFiles(pr, out, 5*time.Second); err != nil {
		return 1, err
	}
	return 0, nil
}

func TestPropagateMeasuresEachShareBothWays(t *testing.T) {
	native, share := t.TempDir(), t.TempDir()
	g := delayedShare{toGuest: 30 * time.Millisecond, toHost: 60 * time.Millisecond}
	r := &runner{env: Env{Exec: g.exec, Shares: []Share{{Path: share, Type: SyncMount, Writable: true}}},
		opt: Options{Quick: true}, rep: &Report{}, helper: "/helper", native: native}
	if err := r.propagate(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, res := range r.rep.Results {
		got[res.Metric+" / "+res.Variant] = res.Value
	}
	check := func(key string, lo, hi float64) {
		t.Helper()
		v, ok := got[key]
		if !ok || v < lo || v > hi {
			t.Errorf("%s = %v (found %v); want %v..%v ms\nall: %v", key, v, ok, lo, hi, got)
		}
	}
	// At least the delay the share adds; the upper bounds only catch a
	// gross error (a timeout measured, say): a loaded 2-core machine
	// stretched the 30 ms sleep to 117 ms.
	check("host edit -> guest p50 / sync mount", 25, 500)
	check("guest write -> host p50 / sync mount", 55, 500)
	if len(r.rep.Skipped) != 0 {
		t.Errorf("skipped: %v", r.rep.Skipped)
	}
	if _, err := os.Stat(filepath.Join(share, ".vmdock-bench", "scratch", "propagate")); !os.IsNotExist(err) {
		t.Errorf("the section left its folder behind: %v", err)
	}
}
