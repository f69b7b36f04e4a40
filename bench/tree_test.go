package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/bench/probe"
)

// localHelper runs the helper's tree phases in this process, as the guest
// would, and logs each call so a test can see the order of phases and
// flushes.
type localHelper struct {
	log []string
}

func (h *localHelper) exec(_ context.Context, argv []string, _ io.Reader, out, _ io.Writer) (int, error) {
	args := map[string]string{}
	for i := 2; i+1 < len(argv); i += 2 {
		args[argv[i]] = argv[i+1]
	}
	if argv[1] != "tree" || args["-phase"] == "" {
		return 1, fmt.Errorf("unexpected helper call %q", argv)
	}
	n, _ := strconv.Atoi(args["-n"])
	secs, err := probe.TreePhase(args["-dir"], n, 1, args["-phase"])
	if err != nil {
		return 1, err
	}
	h.log = append(h.log, "phase "+args["-phase"])
	return 0, json.NewEncoder(out).Encode(probe.PhaseTime{Secs: secs})
}

func TestPhasesSettleOnlySyncMounts(t *testing.T) {
	h := &localHelper{}
	flushed := 0
	r := &runner{helper: "/helper", rep: &Report{}, env: Env{
		Exec: h.exec,
		SyncSettle: func(_ context.Context, path string) error {
			if path != "/host/app" {
				t.Errorf("flush of %q, want the sync mount's host path", path)
			}
			flushed++
			h.log = append(h.log, "flush")
			return nil
		},
	}}
	for _, tc := range []struct {
		target    target
		wantLog   string
		wantRows  int
		wantFlush int
	}{
		{target{name: "native"}, "phase create,phase walk,phase read,phase delete", 0, 0},
		{target{name: "sync mount", syncPath: "/host/app"}, "phase create,flush,phase walk,flush,phase read,flush,phase delete,flush", 4, 4},
	} {
		h.log, flushed = nil, 0
		dir := t.TempDir() + "/tree"
		times, catchUp, err := r.phases(context.Background(), tc.target, "tree", probe.TreePhases, treePhaseNames, "-dir", dir, "-n", "20")
		if err != nil {
			t.Fatalf("%s: %v", tc.target.name, err)
		}
		if got := strings.Join(h.log, ","); got != tc.wantLog {
			t.Errorf("%s: calls %s, want %s", tc.target.name, got, tc.wantLog)
		}
		if len(times) != 4 || len(catchUp) != tc.wantRows || flushed != tc.wantFlush {
			t.Errorf("%s: %d times, %d catch-up rows, %d flushes", tc.target.name, len(times), len(catchUp), flushed)
		}
		if tc.wantRows > 0 && catchUp[0].Metric != MetricCatchUp+"create" {
			t.Errorf("first catch-up row %q", catchUp[0].Metric)
		}
	}
}

func TestTargetsIncludeExcludedFolderAndSyncMount(t *testing.T) {
	r := &runner{native: "/n", env: Env{Shares: []Share{
		{Path: "/h/vfs", Type: "virtiofs", Writable: true, Exclude: []string{"vendor", "node_modules"}},
		{Path: "/h/ro", Type: "9p"},
		{Path: "/h/app", Type: SyncMount, Writable: true, Exclude: []string{"vendor"}},
	}}}
	var got []string
	for _, tg := range r.targets() {
		got = append(got, fmt.Sprintf("%s=%s|%s|%v", tg.name, tg.dir, tg.syncPath, tg.guestOnly))
	}
	want := []string{
		"native (data disk)=/n||false",
		"virtiofs share=/h/vfs/.vmdock-bench/scratch||false",
		"virtiofs share + exclude=/h/vfs/vendor/.vmdock-bench/scratch||true",
		"sync mount=/h/app/.vmdock-bench/scratch|/h/app|false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("targets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestVariantsKeepTheBaselineAndRefuseUnknownNames(t *testing.T) {
	shares := []Share{
		{Path: "/h/vfs", Type: "virtiofs", Writable: true, Exclude: []string{"vendor"}},
		{Path: "/h/app", Type: SyncMount, Writable: true},
	}
	r := &runner{native: "/n", env: Env{Shares: shares}, opt: Options{Variants: []string{"sync mount"}}}
	if err := r.checkVariants(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range r.targets() {
		got = append(got, tg.name)
	}
	if strings.Join(got, ",") != "native (data disk),sync mount" {
		t.Errorf("targets %q", got)
	}
	r.opt.Variants = []string{"sync"}
	err := r.checkVariants()
	if err == nil || !strings.Contains(err.Error(), `"sync"`) || !strings.Contains(err.Error(), "virtiofs share + exclude") {
		t.Errorf("unknown variant: %v; want the bad name and the accepted ones", err)
	}
}
