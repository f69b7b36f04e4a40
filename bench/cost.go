package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmdock/vmdock/bench/probe"
)

// The cost section measures what a running instance costs the
// host, side by side with what the guest itself uses: memory while idle,
// memory given back after a 1 GiB allocation ends, disk space given back
// after a 1 GiB delete, and the first Docker call after an idle pause
// against a warm one. Every figure is a measurement; the targets
// are for the reader to compare, not asserted here.

// HostCost is the host agent's account of the instance's cost and idle
// pause (`vmdock status --json`'s hostAgent.cost and hostAgent.idle), as
// the cost section reads it. The host agent answers it from its own
// state, so asking never wakes a paused VM.
type HostCost struct {
	VMResident       int64  // bytes; 0: not measured
	GuestRAMResident int64  // bytes; 0: the guest-RAM block was not found
	Unmeasured       string // why memory figures are missing
	// DataAllocated is the data disk file's allocated bytes on the host;
	// DataErr says why it is missing (-1).
	DataAllocated int64
	DataErr       string
	Paused        bool
	Pauses        int    // idle pauses since the host agent started
	IdleAfter     string // the idle period now, Go duration text; "": unknown
	IdleOff       string // why the VM never pauses
	LastWakeMs    float64
}

// Timings of the cost section; variables so the tests run in
// milliseconds.
var (
	// Two minutes: the guest agent drains cold page cache in 30 s rounds
	// (half of the inactive cache a round), so the idle figure is what an
	// instance left alone settles at, not the cache a boot left.
	costQuiet      = 2 * time.Minute  // idle before the idle sample
	costAfterAlloc = 30 * time.Second // from freeing 1 GiB to the RSS sample
	costPausedCPU  = 20 * time.Second // CPU window while paused
	costDiskLimit  = 2 * time.Minute  // from the delete to the last disk sample
	costDiskPoll   = 5 * time.Second
	costPauseLimit = 3 * time.Minute // idle period + the guest's quiesce (trims) + margin
	costPausePoll  = 500 * time.Millisecond
)

const (
	costSection = "cost"
	gib         = 1 << 30
	mib         = 1 << 20
	// costIdle is the idle period the wake step sets: the shortest the
	// host agent accepts, so the pause comes quickly.
	costIdle = 10 * time.Second
	// costWarmCalls warm calls give the warm figure as a median: one call
	// on a shared, noisy host could be anything.
	costWarmCalls = 5
)

func (r *runner) cost(ctx context.Context) error {
	if r.env.Cost == nil {
		return fmt.Errorf("the host agent's cost report is not available")
	}
	restore := r.holdIdleOff(ctx)
	defer restore()
	// The wake step goes last: its pause's quiesce reclaims page cache and
	// trims the disks, which would move the other steps' figures.
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"idle memory", r.costIdle},
		{"1 GiB allocation", r.costAlloc},
		{"disk space", r.costDisk},
		{"idle pause wake", r.costWake},
	}
	for _, s := range steps {
		fmt.Fprintf(r.opt.Progress, "bench: cost: %s...\n", s.name)
		if err := s.run(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.rep.Skipped = append(r.rep.Skipped, "cost "+s.name+": "+err.Error())
		}
	}
	return nil
}

// holdIdleOff turns the idle pause off while the section runs, so the VM
// does not pause during the memory and disk steps' quiet waits, and
// returns what puts the period back: the one the host agent had (a
// `vmdock set idle` wins over the config), else the config's.
func (r *runner) holdIdleOff(ctx context.Context) (restore func()) {
	if r.env.SetIdle == nil {
		return func() {}
	}
	back := r.env.IdleAfter
	if hc, err := r.env.Cost(ctx); err == nil {
		back = idleToRestore(hc.IdleAfter, back)
	}
	if err := r.env.SetIdle(ctx, 0); err != nil {
		r.rep.Skipped = append(r.rep.Skipped, "cost: idle pause not turned off for the measurement: "+err.Error())
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := r.env.SetIdle(ctx, back); err != nil {
			r.rep.Skipped = append(r.rep.Skipped, fmt.Sprintf("cost: restore the idle period %s: %v", back, err))
		}
	}
}

// idleToRestore is the idle period to put back: the host agent's if it
// said one, else the configured one.
func idleToRestore(reported string, configured time.Duration) time.Duration {
	if d, err := time.ParseDuration(reported); err == nil && d >= 0 {
		return d
	}
	return configured
}

// guestMem is the guest's own view of its memory, in bytes.
type guestMem struct {
	Used      int64 // free(1)'s "used": total - free - buffers/cache
	Cache     int64 // buffers + page cache + reclaimable slab
	Available int64
}

// parseMeminfo reads /proc/meminfo as free(1) does.
func parseMeminfo(text string) (guestMem, error) {
	kb := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return guestMem{}, fmt.Errorf("meminfo line %q: %w", line, err)
		}
		kb[name] = n
	}
	for _, k := range []string{"MemTotal", "MemFree", "Buffers", "Cached", "MemAvailable"} {
		if _, ok := kb[k]; !ok {
			return guestMem{}, fmt.Errorf("meminfo has no %s line", k)
		}
	}
	cache := kb["Buffers"] + kb["Cached"] + kb["SReclaimable"]
	used := kb["MemTotal"] - kb["MemFree"] - cache
	if used < 0 {
		used = kb["MemTotal"] - kb["MemFree"]
	}
	return guestMem{Used: used << 10, Cache: cache << 10, Available: kb["MemAvailable"] << 10}, nil
}

// memSample is one look at the memory: the host's (the VM process and its
// guest-RAM block) and the guest's own.
type memSample struct {
	VM, RAM int64 // bytes; RAM 0: the block was not found
	Guest   guestMem
}

// sampleMem reads the host side first: asking the host agent does not
// touch the guest, while the guest exec that follows wakes its agent.
func (r *runner) sampleMem(ctx context.Context) (memSample, error) {
	hc, err := r.env.Cost(ctx)
	if err != nil {
		return memSample{}, fmt.Errorf("host agent cost: %w", err)
	}
	s := memSample{VM: hc.VMResident, RAM: hc.GuestRAMResident}
	if s.VM == 0 && r.env.VMPID > 0 {
		// The host agent did not say; the VM process's own figure.
		rss, _, _, err := hostRSS(r.env.VMPID)
		if err != nil {
			return s, err
		}
		s.VM = int64(rss * mib)
	}
	if s.VM == 0 {
		return s, fmt.Errorf("the VM process's memory is not measured: %s", orDash(hc.Unmeasured))
	}
	out, err := r.run(ctx, []string{"cat", "/proc/meminfo"})
	if err != nil {
		return s, err
	}
	s.Guest, err = parseMeminfo(out)
	return s, err
}

func (r *runner) costIdle(ctx context.Context) error {
	if err := sleepCtx(ctx, costQuiet); err != nil {
		return err
	}
	s, err := r.sampleMem(ctx)
	if err != nil {
		return err
	}
	r.addRows(idleRows(s))
	return nil
}

// idleRows: the guest's used memory and page cache beside what the VM
// process holds, and how many times the guest's own figure that is.
func idleRows(s memSample) []Result {
	m := fmt.Sprintf("memory after ~%.0f s idle", costQuiet.Seconds())
	rows := []Result{
		memRow(m, "guest used", s.Guest.Used),
		memRow(m, "guest page cache", s.Guest.Cache),
		memRow(m, "VM process RSS", s.VM),
	}
	if s.RAM > 0 {
		rows = append(rows, memRow(m, "guest-RAM block RSS", s.RAM))
	}
	if g := s.Guest.Used + s.Guest.Cache; g > 0 {
		rows = append(rows, factorRow("VM process RSS / (guest used + page cache), idle", "host vs guest", float64(s.VM)/float64(g)))
	}
	return rows
}

// The allocation step writes allocBytes into a tmpfs of its own at
// allocDir (a fixed path, so its cleanup never depends on an answer).
const (
	allocBytes = gib
	allocDir   = "/tmp/vmdock-bench-cost"
)

func (r *runner) costAlloc(ctx context.Context) error {
	before, err := r.sampleMem(ctx)
	if err != nil {
		return err
	}
	// A guest that cannot hold 1 GiB more would swap or kill for it.
	if need := int64(allocBytes + 256*mib); before.Guest.Available < need {
		return fmt.Errorf("the guest has %d MiB available; the step needs %d MiB", before.Guest.Available/mib, need/mib)
	}
	// Its own tmpfs: /dev/shm is capped at half the guest's RAM. yes(1)
	// writes non-zero data, so every page is touched for real.
	mounted := false
	free := func(ctx context.Context) error {
		if !mounted {
			return nil
		}
		mounted = false
		_, err := r.sh(ctx, fmt.Sprintf(`rm -f %[1]s/fill; umount %[1]s; rmdir %[1]s`, allocDir))
		return err
	}
	defer func() { _ = free(context.WithoutCancel(ctx)) }()
	mounted = true
	if _, err := r.sh(ctx, fmt.Sprintf(`mkdir -p %[1]s && mount -t tmpfs -o size=%[2]dm vmdock-bench-cost %[1]s && yes vmdock | head -c %[3]d >%[1]s/fill`, allocDir, allocBytes/mib+64, allocBytes)); err != nil {
		return fmt.Errorf("allocate 1 GiB in a guest tmpfs: %w", err)
	}
	during, err := r.sampleMem(ctx)
	if err != nil {
		return err
	}
	if err := free(ctx); err != nil {
		return fmt.Errorf("free the guest tmpfs: %w", err)
	}
	if err := sleepCtx(ctx, costAfterAlloc); err != nil {
		return err
	}
	after, err := r.sampleMem(ctx)
	if err != nil {
		return err
	}
	r.addRows(allocRows(before, during, after))
	return nil
}

// allocRows: the VM process's and the guest-RAM block's RSS before,
// during and after the allocation, the factor after/before, and the
// guest's own used + cache after, which is what the RSS could come back
// to.
func allocRows(before, during, after memSample) []Result {
	after30 := fmt.Sprintf("%.0f s after freeing it", costAfterAlloc.Seconds())
	var rows []Result
	add := func(who string, b, d, a int64) {
		m := who + " RSS around a 1 GiB guest allocation"
		rows = append(rows, memRow(m, "before", b), memRow(m, "during (1 GiB in tmpfs)", d), memRow(m, after30, a))
		if b > 0 {
			rows = append(rows, factorRow(who+" RSS after / before a 1 GiB allocation", after30, float64(a)/float64(b)))
		}
	}
	add("VM process", before.VM, during.VM, after.VM)
	if before.RAM > 0 && during.RAM > 0 && after.RAM > 0 {
		add("guest-RAM block", before.RAM, during.RAM, after.RAM)
	}
	rows = append(rows, memRow("guest used + page cache after a 1 GiB allocation", after30, after.Guest.Used+after.Guest.Cache))
	return rows
}

// costFile is the 1 GiB file of the disk step, on the data disk.
const costFile = nativeDir + "/cost-1g"

func (r *runner) costDisk(ctx context.Context) error {
	read := func(ctx context.Context) (int64, error) {
		hc, err := r.env.Cost(ctx)
		if err != nil {
			return 0, fmt.Errorf("host agent cost: %w", err)
		}
		if hc.DataAllocated < 0 {
			return 0, fmt.Errorf("data disk allocation not known: %s", orDash(hc.DataErr))
		}
		return hc.DataAllocated, nil
	}
	before, err := read(ctx)
	if err != nil {
		return err
	}
	defer func() { _, _ = r.sh(context.WithoutCancel(ctx), "rm -f "+shq(costFile)) }()
	// Non-zero data: the drives detect zeroes and would not allocate them.
	if _, err := r.sh(ctx, fmt.Sprintf(`mkdir -p %s && yes vmdock | head -c %d >%s && sync`, shq(nativeDir), int64(gib), shq(costFile))); err != nil {
		return fmt.Errorf("write 1 GiB on the data disk: %w", err)
	}
	written, err := read(ctx)
	if err != nil {
		return err
	}
	if _, err := r.sh(ctx, "rm -f "+shq(costFile)+" && sync"); err != nil {
		return fmt.Errorf("delete the 1 GiB file: %w", err)
	}
	low, took, err := pollDiskBack(ctx, read, before, written, costDiskPoll, costDiskLimit)
	if err != nil {
		return err
	}
	r.addRows(diskRows(before, written, low, took))
	return nil
}

// pollDiskBack samples the data disk's allocation every poll until limit
// after the delete and returns the lowest seen and when it was first
// seen. It ends early once 90% of what the write added is back: the rest
// is the guest's own writes (journal, logs), which need not come back.
func pollDiskBack(ctx context.Context, read func(context.Context) (int64, error), before, written int64, poll, limit time.Duration) (low int64, took time.Duration, err error) {
	start := time.Now()
	low = written
	enough := written - (written-before)*9/10
	for {
		if err := sleepCtx(ctx, poll); err != nil {
			return low, took, err
		}
		a, err := read(ctx)
		if err != nil {
			return low, took, err
		}
		if a < low {
			low, took = a, time.Since(start)
		}
		if low <= enough || time.Since(start) >= limit {
			return low, took, nil
		}
	}
}

// diskRows: the data disk's allocation before the write, after it, and
// the lowest after the delete, with the drop and when it was reached.
func diskRows(before, written, low int64, took time.Duration) []Result {
	m := "data disk allocated on the host, 1 GiB written and deleted"
	rows := []Result{
		memRow(m, "before", before),
		memRow(m, "after writing 1 GiB + sync", written),
		memRow(m, fmt.Sprintf("lowest within %.0f s of deleting it", costDiskLimit.Seconds()), low),
		memRow("data disk space back after deleting 1 GiB", "drop from after the write", written-low),
	}
	if low < written {
		rows = append(rows, Result{Section: costSection, Metric: "data disk space back after deleting 1 GiB", Variant: "time to the lowest (5 s polls)", Value: took.Seconds(), Unit: "s", Better: Info})
	}
	return rows
}

func (r *runner) costWake(ctx context.Context) error {
	if r.env.SetIdle == nil {
		return fmt.Errorf("the idle period cannot be set on this instance")
	}
	call, err := r.apiCall()
	if err != nil {
		return err
	}
	hc, err := r.env.Cost(ctx)
	if err != nil {
		return fmt.Errorf("host agent cost: %w", err)
	}
	if hc.IdleOff != "" {
		return fmt.Errorf("the VM cannot pause: %s", hc.IdleOff)
	}
	if err := r.env.SetIdle(ctx, costIdle); err != nil {
		return fmt.Errorf("set the idle period to %s: %w", costIdle, err)
	}
	waited, err := waitPaused(ctx, r.env.Cost, costPauseLimit, costPausePoll)
	if err != nil {
		return err
	}
	rows := []Result{{Section: costSection, Metric: fmt.Sprintf("idle pause reached, idle period %s", costIdle), Variant: "after the period was set", Value: waited.Seconds(), Unit: "s", Better: Info}}
	rows = append(rows, r.pausedCPURows(ctx)...)
	wake, err := call(ctx)
	if err != nil {
		return fmt.Errorf("first API call after the pause: %w", err)
	}
	warm := make([]time.Duration, 0, costWarmCalls)
	for range costWarmCalls {
		d, err := call(ctx)
		if err != nil {
			return fmt.Errorf("warm API call: %w", err)
		}
		warm = append(warm, d)
	}
	if hc, err := r.env.Cost(ctx); err == nil {
		hostWake := hc.LastWakeMs
		rows = append(rows, wakeRows(r.apiName(), wake, Percentile(warm, 50), hostWake)...)
	} else {
		rows = append(rows, wakeRows(r.apiName(), wake, Percentile(warm, 50), 0)...)
	}
	r.addRows(rows)
	return nil
}

// pausedCPURows are the VM process's CPU while paused, in all and by
// thread, named for which pause of the boot it is: the first pause of a
// fresh boot is the one a user meets first, after the boot's own disk and
// memory work, so it is the one the row is meant to show.
func (r *runner) pausedCPURows(ctx context.Context) []Result {
	which := "pause of this boot"
	if hc, err := r.env.Cost(ctx); err == nil {
		which = pauseOrdinal(hc.Pauses)
	}
	total, threads, err := r.pausedCPU(ctx)
	if err != nil {
		r.rep.Skipped = append(r.rep.Skipped, "cost paused CPU: "+err.Error())
		return nil
	}
	window := fmt.Sprintf("%s, over %.0f s from the pause", which, costPausedCPU.Seconds())
	rows := []Result{{Section: costSection, Metric: "VM process CPU while paused, % of a core", Variant: window, Value: total, Unit: "%", Better: Info}}
	for _, t := range threads {
		rows = append(rows, Result{Section: costSection, Metric: "VM process CPU while paused by thread, % of a core", Variant: t.Name + ", " + window, Value: t.Percent, Unit: "%", Better: Info})
	}
	return rows
}

// pauseOrdinal names the n-th idle pause since the host agent started.
func pauseOrdinal(n int) string {
	if n == 1 {
		return "first pause of this boot"
	}
	return fmt.Sprintf("pause %d of this boot", n)
}

// threadCPU is one thread name's CPU over a window, in % of one core.
type threadCPU struct {
	Name    string
	Percent float64
}

// pausedCPU is the VM process's CPU over costPausedCPU while paused, in %
// of one core, and its threads' part of it; an error when the VM woke
// meanwhile (the figure would not be a paused VM's). The threads are
// best effort: without them the total stands alone.
func (r *runner) pausedCPU(ctx context.Context) (float64, []threadCPU, error) {
	if r.env.VMPID == 0 {
		return 0, nil, fmt.Errorf("the VM runs inside another process (vz): its CPU is not measured")
	}
	c0, err := hostCPU(r.env.VMPID)
	if err != nil {
		return 0, nil, err
	}
	t0, terr := hostThreadsCPU(r.env.VMPID)
	start := time.Now()
	if err := sleepCtx(ctx, costPausedCPU); err != nil {
		return 0, nil, err
	}
	c1, err := hostCPU(r.env.VMPID)
	if err != nil {
		return 0, nil, err
	}
	t1, terr1 := hostThreadsCPU(r.env.VMPID)
	window := time.Since(start)
	if hc, err := r.env.Cost(ctx); err != nil || !hc.Paused {
		return 0, nil, fmt.Errorf("the VM did not stay paused for the %.0f s window", window.Seconds())
	}
	var threads []threadCPU
	if terr == nil && terr1 == nil {
		threads = threadShares(t0, t1, c1-c0, window)
	}
	return percentOf(c1-c0, window), threads, nil
}

// endedThreads names the CPU of threads that ended within the window: the
// process's total keeps it, the live threads no longer show it.
const endedThreads = "threads that ended in the window"

// threadShares turns two looks at a process's threads (CPU by thread
// name) into each name's CPU over window, busiest first, leaving out
// names under 0.1 % of a core; what the process spent beyond the live
// threads' sum went to threads that ended meanwhile.
func threadShares(before, after map[string]time.Duration, total, window time.Duration) []threadCPU {
	var out []threadCPU
	var seen time.Duration
	for name, a := range after {
		d := a - before[name]
		if d <= 0 {
			continue
		}
		seen += d
		out = append(out, threadCPU{Name: name, Percent: percentOf(d, window)})
	}
	if rest := total - seen; rest > 0 {
		out = append(out, threadCPU{Name: endedThreads, Percent: percentOf(rest, window)})
	}
	out = slices.DeleteFunc(out, func(t threadCPU) bool { return t.Percent < 0.1 })
	sort.Slice(out, func(i, j int) bool {
		if out[i].Percent != out[j].Percent {
			return out[i].Percent > out[j].Percent
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// percentOf is d over window in % of one core.
func percentOf(d, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return 100 * d.Seconds() / window.Seconds()
}

// waitPaused polls the host agent until it says the VM is paused and
// returns how long that took.
func waitPaused(ctx context.Context, status func(context.Context) (HostCost, error), limit, poll time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		hc, err := status(ctx)
		if err != nil {
			return 0, fmt.Errorf("host agent status while waiting for the idle pause: %w", err)
		}
		if hc.Paused {
			return time.Since(start), nil
		}
		if time.Since(start) >= limit {
			return 0, fmt.Errorf("the VM did not pause within %s of idle %s (something holds it: a container, connection or session)", limit, costIdle)
		}
		if err := sleepCtx(ctx, poll); err != nil {
			return 0, err
		}
	}
}

// wakeRows: the first call after the pause beside the warm call, the
// factor wake/warm, and the host agent's own wake time (unpause, guest
// clock) when it said.
func wakeRows(api string, wake, warm time.Duration, hostWakeMs float64) []Result {
	m := api + " from the host"
	rows := []Result{
		{Section: costSection, Metric: m, Variant: fmt.Sprintf("warm call (median of %d)", costWarmCalls), Value: ms(warm), Unit: "ms", Better: Info},
		{Section: costSection, Metric: m, Variant: "first call, VM paused while idle", Value: ms(wake), Unit: "ms", Better: Info},
	}
	if warm > 0 {
		rows = append(rows, factorRow(api+": first call after an idle pause / warm call", "wake vs warm", float64(wake)/float64(warm)))
	}
	if hostWakeMs > 0 {
		rows = append(rows, Result{Section: costSection, Metric: m, Variant: "host agent's wake (unpause, clock) within it", Value: hostWakeMs, Unit: "ms", Better: Info})
	}
	return rows
}

// apiName names the call apiCall makes.
func (r *runner) apiName() string {
	if r.env.DockerSocket == "" && r.env.ContainerdSocket != "" {
		return "containerd gRPC Version"
	}
	return "docker GET /version"
}

// apiCall is one runtime API call on a fresh connection: an open
// connection holds the VM awake, so none may stay pooled, and the warm
// call then pays the same connect as the first.
func (r *runner) apiCall() (func(context.Context) (time.Duration, error), error) {
	if r.env.DockerSocket == "" && r.env.ContainerdSocket != "" {
		sock := r.env.ContainerdSocket
		return func(ctx context.Context) (time.Duration, error) {
			ds, err := probe.GRPCLatency(ctx, sock, probe.ContainerdVersionURL, 1)
			if err != nil {
				return 0, err
			}
			return ds[0], nil
		}, nil
	}
	if r.env.DockerSocket == "" {
		return nil, fmt.Errorf("no runtime socket on the host")
	}
	sock := r.env.DockerSocket
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	return func(ctx context.Context) (time.Duration, error) {
		return timedGet(ctx, client, "http://docker/version")
	}, nil
}

// timedGet times one GET to its whole body; a wake must not fail it, so
// its bound is generous.
func timedGet(ctx context.Context, client *http.Client, url string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, fmt.Errorf("GET %s: read the answer: %w", url, err)
	}
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return took, nil
}

// memRow is a size row in MiB.
func memRow(metric, variant string, bytes int64) Result {
	return Result{Section: costSection, Metric: metric, Variant: variant, Value: float64(bytes) / mib, Unit: "MiB", Better: Info}
}

// factorRow is a plain quotient of two measured figures (the report's
// ratio column is oriented "above 1 is better", which these are not).
func factorRow(metric, variant string, v float64) Result {
	return Result{Section: costSection, Metric: metric, Variant: variant, Value: v, Unit: "x", Better: Info}
}

func (r *runner) addRows(rows []Result) {
	for _, res := range rows {
		r.rep.Add(res)
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
