package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/shortdir"
)

const sampleMeminfo = `MemTotal:        2014704 kB
MemFree:         1234568 kB
MemAvailable:    1500000 kB
Buffers:            4096 kB
Cached:           290000 kB
SwapCached:            0 kB
Shmem:              1000 kB
SReclaimable:      20000 kB
`

func TestParseMeminfo(t *testing.T) {
	m, err := parseMeminfo(sampleMeminfo)
	if err != nil {
		t.Fatal(err)
	}
	want := guestMem{
		Used:      (2014704 - 1234568 - 4096 - 290000 - 20000) << 10,
		Cache:     (4096 + 290000 + 20000) << 10,
		Available: 1500000 << 10,
	}
	if m != want {
		t.Errorf("parseMeminfo = %+v, want %+v", m, want)
	}
	if _, err := parseMeminfo("MemTotal: 100 kB\n"); err == nil || !strings.Contains(err.Error(), "MemFree") {
		t.Errorf("missing lines: err %v, want one naming MemFree", err)
	}
	if _, err := parseMeminfo("MemTotal: x kB\n"); err == nil {
		t.Error("a bad number was accepted")
	}
}

func TestWaitPaused(t *testing.T) {
	ctx := context.Background()
	calls := 0
	status := func(context.Context) (HostCost, error) {
		calls++
		return HostCost{Paused: calls >= 3}, nil
	}
	if _, err := waitPaused(ctx, status, time.Second, time.Millisecond); err != nil || calls != 3 {
		t.Errorf("waitPaused: %v after %d calls, want nil after 3", err, calls)
	}
	never := func(context.Context) (HostCost, error) { return HostCost{}, nil }
	if _, err := waitPaused(ctx, never, 20*time.Millisecond, time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not pause") {
		t.Errorf("never paused: err %v", err)
	}
	broken := func(context.Context) (HostCost, error) { return HostCost{}, errors.New("socket gone") }
	if _, err := waitPaused(ctx, broken, time.Second, time.Millisecond); err == nil || !strings.Contains(err.Error(), "socket gone") {
		t.Errorf("status error: err %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := waitPaused(cctx, never, time.Second, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err %v", err)
	}
}

func TestPollDiskBack(t *testing.T) {
	ctx := context.Background()
	seq := func(vals ...int64) func(context.Context) (int64, error) {
		i := 0
		return func(context.Context) (int64, error) {
			v := vals[min(i, len(vals)-1)]
			i++
			return v, nil
		}
	}
	// 1000 written over 100: back to 190 is enough, and polling ends there.
	read := seq(1100, 800, 150, 100)
	low, took, err := pollDiskBack(ctx, read, 100, 1100, time.Millisecond, time.Minute)
	if err != nil || low != 150 || took <= 0 {
		t.Errorf("early end: low %d took %v err %v; want 150", low, took, err)
	}
	// Never enough: the lowest seen by the limit.
	low, _, err = pollDiskBack(ctx, seq(1100, 900, 950), 100, 1100, time.Millisecond, 20*time.Millisecond)
	if err != nil || low != 900 {
		t.Errorf("limit: low %d err %v; want 900", low, err)
	}
	// Nothing back: low stays the written figure, took 0.
	low, took, _ = pollDiskBack(ctx, seq(1100), 100, 1100, time.Millisecond, 5*time.Millisecond)
	if low != 1100 || took != 0 {
		t.Errorf("nothing back: low %d took %v", low, took)
	}
}

func TestIdleToRestore(t *testing.T) {
	for _, tc := range []struct {
		reported string
		cfg      time.Duration
		want     time.Duration
	}{
		{"10m0s", time.Minute, 10 * time.Minute},
		{"0", time.Minute, 0},
		{"", time.Minute, time.Minute},
		{"bogus", 0, 0},
	} {
		if got := idleToRestore(tc.reported, tc.cfg); got != tc.want {
			t.Errorf("idleToRestore(%q, %v) = %v, want %v", tc.reported, tc.cfg, got, tc.want)
		}
	}
}

func rowValue(t *testing.T, rows []Result, metric, variant string) float64 {
	t.Helper()
	for _, r := range rows {
		if r.Metric == metric && r.Variant == variant {
			return r.Value
		}
	}
	t.Fatalf("no row %q / %q in %+v", metric, variant, rows)
	return 0
}

func TestCostRows(t *testing.T) {
	idle := memSample{VM: 1800 * mib, RAM: 1700 * mib, Guest: guestMem{Used: 300 * mib, Cache: 300 * mib}}
	rows := idleRows(idle)
	if got := rowValue(t, rows, "VM process RSS / (guest used + page cache), idle", "host vs guest"); got != 3 {
		t.Errorf("idle factor %v, want 3", got)
	}
	if got := rowValue(t, rows, "memory after ~120 s idle", "guest-RAM block RSS"); got != 1700 {
		t.Errorf("guest-RAM row %v", got)
	}
	for _, r := range rows {
		if r.Section != costSection || r.Better != Info {
			t.Errorf("row %+v: want section cost, no ratio", r)
		}
	}

	before := memSample{VM: 1000 * mib, Guest: guestMem{Used: 300 * mib, Cache: 200 * mib}}
	during, after := before, before
	during.VM, after.VM = 2000*mib, 1500*mib
	rows = allocRows(before, during, after)
	if got := rowValue(t, rows, "VM process RSS after / before a 1 GiB allocation", "30 s after freeing it"); got != 1.5 {
		t.Errorf("alloc factor %v, want 1.5", got)
	}
	for _, r := range rows {
		if strings.HasPrefix(r.Metric, "guest-RAM block") {
			t.Errorf("guest-RAM row without the block's figures: %+v", r)
		}
	}
	if got := rowValue(t, rows, "guest used + page cache after a 1 GiB allocation", "30 s after freeing it"); got != 500 {
		t.Errorf("guest used + cache %v", got)
	}

	rows = diskRows(100*mib, 1124*mib, 150*mib, 35*time.Second)
	if got := rowValue(t, rows, "data disk space back after deleting 1 GiB", "drop from after the write"); got != 974 {
		t.Errorf("disk drop %v, want 974", got)
	}
	if got := rowValue(t, rows, "data disk space back after deleting 1 GiB", "time to the lowest (5 s polls)"); got != 35 {
		t.Errorf("disk time %v", got)
	}

	rows = wakeRows("docker GET /version", 400*time.Millisecond, 10*time.Millisecond, 120)
	if got := rowValue(t, rows, "docker GET /version: first call after an idle pause / warm call", "wake vs warm"); got != 40 {
		t.Errorf("wake factor %v, want 40", got)
	}
	if got := rowValue(t, rows, "docker GET /version from the host", "host agent's wake (unpause, clock) within it"); got != 120 {
		t.Errorf("host wake %v", got)
	}
}

// fakeCostVM is an instance as the cost section sees it: a host agent
// that pauses the VM once the idle period is 10 s and wakes it at the
// first docker call, a guest that answers the section's commands, and
// memory and disk figures that follow what the guest did.
type fakeCostVM struct {
	mu     sync.Mutex
	idle   []time.Duration
	paused bool
	woke   bool
	alloc  bool  // 1 GiB in the guest tmpfs
	file   bool  // 1 GiB on the data disk
	trimIn int   // host looks after the delete until its space is back
	data   int64 // data disk allocation
	cmds   []string
}

func (f *fakeCostVM) cost(context.Context) (HostCost, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vm := int64(900 * mib)
	if f.alloc {
		vm += gib
	}
	data := f.data
	switch {
	case f.file:
		data += gib
	case f.trimIn > 0:
		f.trimIn--
		data += gib
	}
	after := "10m0s"
	if n := len(f.idle); n > 0 {
		after = f.idle[n-1].String()
	}
	pauses := 0
	if f.paused || f.woke {
		pauses = 1
	}
	return HostCost{VMResident: vm, GuestRAMResident: vm - 100*mib, DataAllocated: data, Paused: f.paused, Pauses: pauses, IdleAfter: after, LastWakeMs: 80}, nil
}

func (f *fakeCostVM) setIdle(_ context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idle = append(f.idle, d)
	f.paused = d == costIdle && !f.woke
	return nil
}

func (f *fakeCostVM) exec(_ context.Context, argv []string, _ io.Reader, stdout, _ io.Writer) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cmd := strings.Join(argv, " ")
	f.cmds = append(f.cmds, cmd)
	switch {
	case cmd == "cat /proc/meminfo":
		fmt.Fprint(stdout, sampleMeminfo)
	case strings.Contains(cmd, "mount -t tmpfs"):
		f.alloc = true
	case strings.Contains(cmd, "umount"):
		f.alloc = false
	case strings.Contains(cmd, ">"+shq(costFile)):
		f.file = true
	case strings.Contains(cmd, "rm -f "+shq(costFile)):
		if f.file {
			f.trimIn = 2
		}
		f.file = false
	}
	return 0, nil
}

// dockerServer answers GET /version on a unix socket and wakes fake.
func (f *fakeCostVM) dockerServer(t *testing.T) string {
	sock := filepath.Join(shortdir.New(t), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.paused, f.woke = false, true
		f.mu.Unlock()
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"Version":"fake"}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func shortCostTimings(t *testing.T) {
	saved := []time.Duration{costQuiet, costAfterAlloc, costPausedCPU, costDiskLimit, costDiskPoll, costPauseLimit, costPausePoll}
	costQuiet, costAfterAlloc, costPausedCPU = time.Millisecond, time.Millisecond, 20*time.Millisecond
	costDiskLimit, costDiskPoll, costPauseLimit, costPausePoll = time.Second, time.Millisecond, time.Second, time.Millisecond
	t.Cleanup(func() {
		costQuiet, costAfterAlloc, costPausedCPU, costDiskLimit, costDiskPoll, costPauseLimit, costPausePoll =
			saved[0], saved[1], saved[2], saved[3], saved[4], saved[5], saved[6]
	})
}

// The whole section on a fake instance: the idle period is off for the
// memory and disk steps, 10 s for the wake and put back afterwards, the
// tmpfs is freed, and every step reports its rows.
func TestCostSectionOnFakeInstance(t *testing.T) {
	shortCostTimings(t)
	f := &fakeCostVM{data: 300 * mib}
	env := Env{Exec: f.exec, Cost: f.cost, SetIdle: f.setIdle, DockerSocket: f.dockerServer(t), VMPID: 0}
	if runtime.GOOS == "linux" {
		env.VMPID = 1 // any process: the fake's "VM"; its CPU is read from /proc
	}
	rep := &Report{}
	if err := Run(context.Background(), env, Options{Sections: []string{"cost"}}, rep); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{0, costIdle, 10 * time.Minute}; !slices.Equal(f.idle, want) {
		t.Errorf("idle periods set %v, want %v", f.idle, want)
	}
	if f.alloc || f.file {
		t.Errorf("left behind: tmpfs %v, data disk file %v", f.alloc, f.file)
	}
	for _, s := range rep.Skipped {
		if !strings.HasPrefix(s, "helper:") {
			t.Errorf("skipped: %s", s)
		}
	}
	rows := rep.Results
	if got := rowValue(t, rows, "VM process RSS around a 1 GiB guest allocation", "during (1 GiB in tmpfs)"); got != 900+1024 {
		t.Errorf("during %v", got)
	}
	if got := rowValue(t, rows, "data disk allocated on the host, 1 GiB written and deleted", "after writing 1 GiB + sync"); got != 300+1024 {
		t.Errorf("written %v", got)
	}
	if got := rowValue(t, rows, "data disk space back after deleting 1 GiB", "drop from after the write"); got != 1024 {
		t.Errorf("drop %v", got)
	}
	rowValue(t, rows, "docker GET /version: first call after an idle pause / warm call", "wake vs warm")
	if runtime.GOOS == "linux" {
		rowValue(t, rows, "VM process CPU while paused, % of a core", "first pause of this boot, over 0 s from the pause")
	}
}

// Without a pausing host agent the wake step says why and the others run.
func TestCostSectionWithoutSetIdle(t *testing.T) {
	shortCostTimings(t)
	f := &fakeCostVM{data: 300 * mib}
	rep := &Report{}
	env := Env{Exec: f.exec, Cost: f.cost, DockerSocket: f.dockerServer(t)}
	if err := Run(context.Background(), env, Options{Sections: []string{"cost"}}, rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range rep.Skipped {
		found = found || strings.HasPrefix(s, "cost idle pause wake: the idle period cannot be set")
	}
	if !found {
		t.Errorf("skipped %q: want the wake step's reason", rep.Skipped)
	}
	rowValue(t, rep.Results, "memory after ~0 s idle", "VM process RSS")
}

// Each thread name's CPU over the window, busiest first; what the live
// threads do not account for went to threads that ended; names under
// 0.1 % of a core are left out.
func TestThreadShares(t *testing.T) {
	before := map[string]time.Duration{"CPU 0/TCG": 5 * time.Second, "worker": 2 * time.Second, "qemu-system-x86": time.Second, "call_rcu": 0}
	after := map[string]time.Duration{"CPU 0/TCG": 5 * time.Second, "worker": 10 * time.Second, "qemu-system-x86": time.Second + 2*time.Second, "call_rcu": 10 * time.Millisecond}
	// 8 s of workers + 2 s of the main loop + 10 ms call_rcu, and 5 s the
	// process counted beyond its live threads.
	total := 8*time.Second + 2*time.Second + 10*time.Millisecond + 5*time.Second
	got := threadShares(before, after, total, 20*time.Second)
	want := []threadCPU{{"worker", 40}, {endedThreads, 25}, {"qemu-system-x86", 10}}
	if len(got) != len(want) {
		t.Fatalf("threadShares = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || math.Abs(got[i].Percent-want[i].Percent) > 1e-9 {
			t.Errorf("threadShares[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestPauseOrdinal(t *testing.T) {
	for n, want := range map[int]string{1: "first pause of this boot", 3: "pause 3 of this boot"} {
		if got := pauseOrdinal(n); got != want {
			t.Errorf("pauseOrdinal(%d) = %q, want %q", n, got, want)
		}
	}
}
