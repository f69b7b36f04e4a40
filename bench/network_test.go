package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vmdock/vmdock/bench/probe"
)

// netGuest stands in for one instance: its "guest" echo servers listen
// on the host's loopback at the port asked, as a forward would make them
// reachable, and its downloads run here; calls records which instance
// downloaded when, to show the rounds interleave.
type netGuest struct {
	name  string
	calls *[]string
	mu    *sync.Mutex
}

func (g netGuest) exec(ctx context.Context, argv []string, stdin io.Reader, out, _ io.Writer) (int, error) {
	args := map[string]string{}
	for i := 2; i+1 < len(argv); i += 2 {
		args[argv[i]] = argv[i+1]
	}
	switch argv[1] {
	case "serve":
		_, port, _ := net.SplitHostPort(args["-addr"])
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			return 1, err
		}
		defer ln.Close()
		go probe.ServeEcho(ln)
		json.NewEncoder(out).Encode(map[string]string{"addr": ln.Addr().String()})
		io.Copy(io.Discard, stdin) // until the runner stops the server
		return 0, nil
	case "download":
		g.mu.Lock()
		*g.calls = append(*g.calls, g.name)
		g.mu.Unlock()
		n, d, err := probe.Download(ctx, args["-addr"])
		if err != nil {
			return 1, err
		}
		return 0, json.NewEncoder(out).Encode(map[string]float64{"bytes": float64(n), "seconds": d.Seconds()})
	}
	return 1, fmt.Errorf("unexpected helper call %q", argv)
}

// Two instances measured side by side: the rounds alternate between them,
// the VM type's own stack is every metric's baseline (its rows first),
// each row is a median over the rounds, and the gvisor targets are judged.
func TestNetworkSectionInterleavesTwoInstances(t *testing.T) {
	helper := filepath.Join(t.TempDir(), "helper")
	if err := os.WriteFile(helper, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var calls []string
	var mu sync.Mutex
	env := func(stack string) Env {
		return Env{
			Exec:         netGuest{name: stack, calls: &calls, mu: &mu}.exec,
			Shares:       []Share{{Path: t.TempDir(), Type: "virtiofs", Writable: true}},
			HostAccessIP: "127.0.0.1",
			NetStack:     stack,
			PortPath:     func(context.Context, string, int) string { return "direct" },
		}
	}
	// This instance runs gvisor; the --versus one slirp, which must still
	// come first as the baseline.
	versus := env("slirp")
	rep := &Report{}
	if err := Run(context.Background(), env("gvisor"), Options{Sections: []string{"network"}, Quick: true, Helper: helper, Versus: &versus}, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) > 0 {
		t.Fatalf("skipped: %q", rep.Skipped)
	}
	if got := strings.Join(calls, ","); got != "slirp,gvisor,slirp,gvisor,slirp,gvisor" {
		t.Errorf("downloads ran in the order %s, want the rounds interleaved, slirp first", got)
	}
	seen := map[string]bool{}
	var variants []string
	for _, r := range rep.Results {
		if r.Section != "network" || r.Note != "median of 3 rounds" || r.Value <= 0 {
			t.Errorf("row %+v", r)
		}
		if !seen[r.Metric] {
			seen[r.Metric] = true
			if !r.Baseline || !strings.HasPrefix(r.Variant, "slirp: ") {
				t.Errorf("%s: the baseline is %q, want slirp's first row", r.Metric, r.Variant)
			}
		}
		variants = append(variants, r.Metric+" / "+r.Variant)
	}
	want := []string{
		"published port echo stream 16MB / slirp: direct path", "published port echo stream 16MB / gvisor: direct path",
		"published port echo stream 16MB / slirp: agent tunnel", "published port echo stream 16MB / gvisor: agent tunnel",
		"published port connect+echo p50, 1 conn / slirp: direct path", "published port connect+echo p50, 1 conn / gvisor: direct path",
		"published port connect+echo p50, 1 conn / slirp: agent tunnel", "published port connect+echo p50, 1 conn / gvisor: agent tunnel",
		"download 16MB from the host's loopback (host access) / slirp: guest->host (127.0.0.1)",
		"download 16MB from the host's loopback (host access) / gvisor: guest->host (127.0.0.1)",
	}
	if strings.Join(variants, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(variants, "\n"), strings.Join(want, "\n"))
	}
	if len(rep.Checks) != 2 || !strings.Contains(rep.Checks[0].What, "gvisor/slirp direct path stream") || rep.Checks[0].Target != 1.0 {
		t.Errorf("checks %+v", rep.Checks)
	}
}

// One instance alone: its rows, no targets.
func TestNetworkSectionOneInstance(t *testing.T) {
	sides := []*netSide{{stack: "gvisor", path: "direct path", r: &runner{env: Env{HostAccessIP: "10.254.254.254"}},
		samples: map[string][]float64{netDirect: {3, 1, 2}, netDirect + " p50": {5}, netDownload: {7, 9}}}}
	rows, checks := networkRows(sides, 16<<20)
	if len(checks) != 0 {
		t.Errorf("checks %+v with one instance", checks)
	}
	if len(rows) != 3 || rows[0].Value != 2 || rows[1].Unit != "ms" || rows[2].Value != 8 || rows[2].Variant != "gvisor: guest->host (10.254.254.254)" {
		t.Errorf("rows %+v", rows)
	}
}
