package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fakeGuest answers the sync section's guest commands the way Debian's
// tools do, with a fixed time per mode, and records what ran.
type fakeGuest struct {
	secs     map[string]float64 // mode -> dd seconds per round
	rounds   []string           // mode of each dd round, in order
	commits  []string
	umounts  []string
	failMkfs string // serial whose mkfs fails
}

var ddOfRe = regexp.MustCompile(`of='/run/vmdock-bench-sync/(\w+)/sync\.bin' bs=4k count=(\d+)`)

func (g *fakeGuest) exec(_ context.Context, argv []string, _ io.Reader, stdout, _ io.Writer) (int, error) {
	cmd := strings.Join(argv, " ")
	switch {
	case strings.Contains(cmd, "mkfs.ext4"):
		if g.failMkfs != "" && strings.Contains(cmd, g.failMkfs) {
			fmt.Fprintln(stdout, "mkfs.ext4: Device size reported to be zero.")
			return 1, nil
		}
		fmt.Fprintln(stdout, "/dev/vdd")
	case ddOfRe.MatchString(cmd):
		m := ddOfRe.FindStringSubmatch(cmd)
		g.rounds = append(g.rounds, m[1])
		var n int
		fmt.Sscan(m[2], &n)
		fmt.Fprintf(stdout, "%d+0 records in\n%d+0 records out\n%d bytes (x kB) copied, %g s, 1 MB/s\n", n, n, n*4096, g.secs[m[1]])
	case strings.Contains(cmd, "commits -dir"):
		mode := cmd[strings.LastIndex(cmd, "/run/vmdock-bench-sync/")+len("/run/vmdock-bench-sync/"):]
		mode, _, _ = strings.Cut(mode, " ")
		g.commits = append(g.commits, mode)
		fmt.Fprintf(stdout, `{"seconds": %g}`+"\n", 2*g.secs[mode])
	case strings.HasPrefix(cmd, "/bin/sh -c umount "):
		g.umounts = append(g.umounts, strings.TrimPrefix(cmd, "/bin/sh -c umount "))
	}
	return 0, nil
}

type fakeScratch struct {
	calls      []string
	failAttach int // slot whose attach fails; -1 none
}

func (f *fakeScratch) Attach(_ context.Context, slot int, sync string) (string, error) {
	f.calls = append(f.calls, fmt.Sprintf("attach %d %s", slot, sync))
	if slot == f.failAttach {
		return "", errors.New("Bus 'pcie.0' does not support hotplugging")
	}
	return fmt.Sprintf("vmdock-scratch%d", slot), nil
}

func (f *fakeScratch) Detach(_ context.Context, slot int) error {
	f.calls = append(f.calls, fmt.Sprintf("detach %d", slot))
	return nil
}

func syncRunner(g *fakeGuest, s ScratchDisks, helper string) *runner {
	env := Env{Exec: g.exec}
	if s != nil {
		env.Scratch = s
	}
	return &runner{env: env, opt: Options{Quick: true}, rep: &Report{}, helper: helper}
}

func TestSyncComparesModesInInterleavedRounds(t *testing.T) {
	g := &fakeGuest{secs: map[string]float64{"none": 0.1, "fsync": 1, "full": 2}}
	s := &fakeScratch{failAttach: -1}
	r := syncRunner(g, s, "/share/.vmdock-bench/vmdock-bench-helper")
	if err := r.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.rep.ComputeRatios()

	// Each round starts with the next mode, so none is not always first.
	want := []string{"none", "fsync", "full", "fsync", "full", "none", "full", "none", "fsync"}
	if !slices.Equal(g.rounds, want) || !slices.Equal(g.commits, want) {
		t.Errorf("rounds %q, commits %q; want %q", g.rounds, g.commits, want)
	}
	wantCalls := []string{"attach 0 none", "attach 1 fsync", "attach 2 full", "detach 0", "detach 1", "detach 2"}
	if !slices.Equal(s.calls, wantCalls) {
		t.Errorf("scratch calls %q, want %q", s.calls, wantCalls)
	}
	if len(g.umounts) != 3 {
		t.Errorf("umounts %q", g.umounts)
	}
	// 100 writes in 0.1 s per round: 1000 ops/s; fsync at a tenth of it.
	type row struct {
		metric, variant string
		value, ratio    float64
	}
	var got []row
	for _, res := range r.rep.Results {
		got = append(got, row{res.Metric, res.Variant, math.Round(res.Value*100) / 100, math.Round(res.Ratio*1000) / 1000})
	}
	wantRows := []row{
		{MetricSyncWrite, "disk-sync none", 1000, 1},
		{MetricSyncWrite, "disk-sync fsync", 100, 0.1},
		{MetricSyncWrite, "disk-sync full", 50, 0.05},
		{MetricSyncCommit, "disk-sync none", 200, 1},
		{MetricSyncCommit, "disk-sync fsync", 20, 0.1},
		{MetricSyncCommit, "disk-sync full", 10, 0.05},
	}
	if !slices.Equal(got, wantRows) {
		t.Errorf("rows:\n got %v\nwant %v", got, wantRows)
	}
	if r.rep.Results[0].Note != "3 rounds, 1000 to 1000 ops/s" {
		t.Errorf("note %q", r.rep.Results[0].Note)
	}
}

func TestSyncWithoutHelperSkipsOnlyTheCommitRow(t *testing.T) {
	g := &fakeGuest{secs: map[string]float64{"none": 0.1, "fsync": 1, "full": 1}}
	r := syncRunner(g, &fakeScratch{failAttach: -1}, "")
	if err := r.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(r.rep.Results) != 3 || len(g.commits) != 0 {
		t.Errorf("results %d, commits %q", len(r.rep.Results), g.commits)
	}
	if len(r.rep.Skipped) != 1 || !strings.Contains(r.rep.Skipped[0], "needs the guest helper") {
		t.Errorf("skipped %q", r.rep.Skipped)
	}
}

// A failure half-way releases exactly what was set up: the disks attached
// so far are unmounted and detached, the one that failed is not.
func TestSyncReleasesWhatItAttachedOnFailure(t *testing.T) {
	g := &fakeGuest{}
	s := &fakeScratch{failAttach: 2}
	r := syncRunner(g, s, "")
	err := r.sync(context.Background())
	if err == nil || !strings.Contains(err.Error(), "does not support hotplugging") {
		t.Fatalf("sync = %v", err)
	}
	want := []string{"attach 0 none", "attach 1 fsync", "attach 2 full", "detach 0", "detach 1"}
	if !slices.Equal(s.calls, want) {
		t.Errorf("scratch calls %q, want %q", s.calls, want)
	}
	if len(g.umounts) != 2 || len(r.rep.Results) != 0 {
		t.Errorf("umounts %q, results %v", g.umounts, r.rep.Results)
	}

	// mkfs failing: attached but never mounted, so detached, not unmounted.
	g = &fakeGuest{failMkfs: "vmdock-scratch1"}
	s = &fakeScratch{failAttach: -1}
	r = syncRunner(g, s, "")
	err = r.sync(context.Background())
	if err == nil || !strings.Contains(err.Error(), "scratch disk for disk-sync fsync") {
		t.Fatalf("sync = %v", err)
	}
	want = []string{"attach 0 none", "attach 1 fsync", "detach 0", "detach 1"}
	if !slices.Equal(s.calls, want) || len(g.umounts) != 1 {
		t.Errorf("scratch calls %q, umounts %q", s.calls, g.umounts)
	}
}

func TestSyncSkipsWhenTheVMCannotTakeDisks(t *testing.T) {
	g := &fakeGuest{}
	r := syncRunner(g, nil, "")
	r.env.NoScratch = "the vz driver cannot attach a disk to a running VM"
	err := r.sync(context.Background())
	if err == nil || err.Error() != r.env.NoScratch {
		t.Errorf("sync = %v", err)
	}
	if len(g.rounds) != 0 {
		t.Errorf("ran %q", g.rounds)
	}
}
