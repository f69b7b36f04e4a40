package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmdock/vmdock/bench/probe"
)

// Sections, in run order.
// The last, remote, is a remote instance's only one.
var Sections = []string{"disk", "tree", "propagate", "ports", "network", "api", "domains", "boot", "memory", "sync", "cost", SectionRemote}

// ExecFunc runs argv in the guest (instance.Exec without the instance).
type ExecFunc func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)

// Share is one mounted host folder, visible in the guest at the same path.
type Share struct {
	Path     string
	Type     string // 9p | virtiofs | SyncMount
	Cache    string // the share's cache mode when not the type's default
	Writable bool
	// Exclude are the share's excluded subfolders (on the guest's disk);
	// the first is a target of its own, "<type> share + exclude".
	Exclude []string
}

// SyncMount is the Share type of a sync mount (a synced copy on the
// guest's disk, not a shared file system).
const SyncMount = "sync"

// Env is the running instance as the runner sees it; the CLI fills it.
type Env struct {
	Exec         ExecFunc
	Shares       []Share
	DockerSocket string // host side of the docker.sock tunnel
	// ContainerdSocket is the host side of the containerd.sock tunnel of a
	// containerd instance ("" for docker); the api section then measures
	// containerd.
	ContainerdSocket string
	Boot             Boot // the host agent's report of the latest boot
	// SyncFlush syncs the sync mount holding path now and waits (nil
	// without sync mounts).
	SyncFlush func(ctx context.Context, path string) error
	// SyncSettle flushes the sync mount at path and waits until its engine
	// is quiet (see Settle); nil without sync mounts.
	SyncSettle   func(ctx context.Context, path string) error
	HostAgentPID int
	VMPID        int    // qemu; 0 when the VM runs in-process (vz)
	HostAccessIP string // guest address that reaches the host's loopback
	// PortPath says how the host agent forwards a guest port now
	// ("direct", "tunnel", "" when not forwarded); nil when unknown.
	PortPath func(ctx context.Context, proto string, guestPort int) string
	// Scratch hot-plugs disks for the sync section; nil when the VM cannot
	// take disks while it runs, and NoScratch says why.
	Scratch   ScratchDisks
	NoScratch string
	// Cost asks the host agent what the instance costs the host now (the
	// cost section); nil when it cannot be asked.
	Cost func(ctx context.Context) (HostCost, error)
	// SetIdle changes the running VM's idle period (0: never pause); nil
	// when it cannot, and the cost section's wake step is skipped.
	SetIdle func(ctx context.Context, after time.Duration) error
	// IdleAfter is the configured idle period, put back after the cost
	// section when the host agent does not report its own.
	IdleAfter time.Duration
	// DialGuest opens a TCP stream to addr inside the guest that the host
	// agent dials over the agent channel, as the container-domains router
	// does (the domains section's agent tunnel); nil when it cannot.
	DialGuest func(ctx context.Context, addr string) (net.Conn, error)
	// NetStack is the network stack the VM runs on (slirp, vznat, gvisor):
	// the network section names its rows after it.
	NetStack string
	// DomainRoute finds the router's name for a container (by ID, full or
	// a prefix); ok is false while the router has none. nil: no router.
	DomainRoute func(ctx context.Context, containerID string) (rt DomainRoute, ok bool, err error)
	// Remote is a remote instance's server (no VM: Exec and the VM's
	// hooks are nil); nil for a VM instance.
	Remote *RemoteEnv
}

// Options choose what to run.
type Options struct {
	Sections []string
	Quick    bool
	// Variants keeps only these targets of the file sections (disk, tree,
	// propagate), by name ("sync mount", "virtiofs share + exclude", ...);
	// the native baseline always runs. Empty keeps them all.
	Variants []string
	Helper   string // host path of the linux helper binary; "" skips helper sections
	Progress io.Writer
	// Versus is a second running instance the network section measures
	// beside this one, rounds interleaved; nil: this one alone.
	Versus *Env
}

// ParseSections checks a --sections value; empty means all.
func ParseSections(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return slices.Clone(Sections), nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(Sections, name) {
			return nil, fmt.Errorf("section %q: accepted: %s", name, strings.Join(Sections, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

type runner struct {
	env    Env
	opt    Options
	rep    *Report
	helper string // guest path of the helper, "" when unavailable
	native string // guest-native scratch folder
}

// nativeDir is on the guest's data disk, where container volumes live.
const nativeDir = "/var/lib/docker/vmdock-bench"

// Run measures the sections of opt on env and adds the results to rep.
func Run(ctx context.Context, env Env, opt Options, rep *Report) error {
	r := &runner{env: env, opt: opt, rep: rep, native: nativeDir}
	if opt.Progress == nil {
		r.opt.Progress = io.Discard
	}
	if err := r.checkVariants(); err != nil {
		return err
	}
	secs, skip := splitSections(opt.Sections, env.Remote)
	if skip != "" {
		rep.Skipped = append(rep.Skipped, skip)
	}
	if env.Remote == nil {
		if err := r.installHelper(); err != nil {
			rep.Skipped = append(rep.Skipped, "helper: "+err.Error())
		}
		defer r.cleanup()
	}
	funcs := map[string]func(context.Context) error{
		"disk": r.disk, "tree": r.tree, "ports": r.ports, "network": r.network, "api": r.api,
		"boot": r.boot, "memory": r.memory, "sync": r.sync, "propagate": r.propagate,
		"cost": r.cost, "domains": r.domains, SectionRemote: r.remote,
	}
	for _, s := range secs {
		fmt.Fprintf(r.opt.Progress, "bench: %s...\n", s)
		start := time.Now()
		if err := funcs[s](ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			slog.Warn("bench section failed", "section", s, "err", err)
			rep.Skipped = append(rep.Skipped, s+": "+err.Error())
		}
		slog.Debug("bench section done", "section", s, "took", time.Since(start))
	}
	rep.ComputeRatios()
	return nil
}

// installHelper copies the helper into the first writable share: the
// guest sees that folder at the same path, so no copy protocol is needed.
func (r *runner) installHelper() error {
	if r.opt.Helper == "" {
		return fmt.Errorf("no helper binary (`make bench` builds it into bin/, or pass --helper); tree, ports, api need it")
	}
	for _, s := range r.env.Shares {
		if !s.Writable || s.Type == SyncMount {
			continue
		}
		dir := filepath.Join(s.Path, ".vmdock-bench")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("helper dir: %w", err)
		}
		dst := filepath.Join(dir, "vmdock-bench-helper")
		b, err := os.ReadFile(r.opt.Helper)
		if err != nil {
			return fmt.Errorf("read helper: %w", err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			return fmt.Errorf("copy helper: %w", err)
		}
		r.helper = dst
		return nil
	}
	return fmt.Errorf("no writable shared folder to put the helper in (start with -V <dir>:w)")
}

func (r *runner) cleanup() {
	if r.helper != "" {
		os.RemoveAll(filepath.Dir(r.helper))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = r.sh(ctx, "rm -rf "+shq(r.native))
}

func (r *runner) needHelper() error {
	if r.helper == "" {
		return fmt.Errorf("needs the guest helper (see the helper line)")
	}
	return nil
}

// sh runs a shell command in the guest and returns its combined output;
// a non-zero exit is an error that carries the output.
func (r *runner) sh(ctx context.Context, script string) (string, error) {
	return r.run(ctx, []string{"/bin/sh", "-c", script})
}

func (r *runner) run(ctx context.Context, argv []string) (string, error) {
	var out bytes.Buffer
	code, err := r.env.Exec(ctx, argv, nil, &out, &out)
	if err != nil {
		return out.String(), fmt.Errorf("guest exec %s: %w", argv[0], err)
	}
	if code != 0 {
		return out.String(), fmt.Errorf("guest %q exited %d: %s", strings.Join(argv, " "), code, strings.TrimSpace(lastLines(out.String(), 3)))
	}
	return out.String(), nil
}

// helperJSON runs the helper in the guest and decodes its JSON answer.
func (r *runner) helperJSON(ctx context.Context, v any, args ...string) error {
	var out, errb bytes.Buffer
	argv := append([]string{r.helper}, args...)
	code, err := r.env.Exec(ctx, argv, nil, &out, &errb)
	if err != nil {
		return fmt.Errorf("guest helper %s: %w", args[0], err)
	}
	if code != 0 {
		return fmt.Errorf("guest helper %s exited %d: %s", args[0], code, strings.TrimSpace(errb.String()))
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		return fmt.Errorf("guest helper %s: bad answer %q: %w", args[0], out.String(), err)
	}
	return nil
}

// target is one place the file benchmarks run: native disk or a share.
type target struct {
	name string
	dir  string
	// syncPath is the sync mount's host path; "" for other targets.
	syncPath string
	// guestOnly: an excluded folder of a share, which the host never sees.
	guestOnly bool
}

// checkVariants refuses a --variants name that is no target of this
// instance.
func (r *runner) checkVariants() error {
	all := r.allTargets()
	var names []string
	for _, t := range all[1:] {
		names = append(names, t.name)
	}
	for _, v := range r.opt.Variants {
		if !slices.Contains(names, v) {
			return fmt.Errorf("bench variant %q is not one of this instance's: %s", v, strings.Join(names, ", "))
		}
	}
	return nil
}

// targets are the file sections' targets: the native disk first (the
// baseline), then the shares and sync mounts that Options.Variants keeps.
func (r *runner) targets() []target {
	all := r.allTargets()
	if len(r.opt.Variants) == 0 {
		return all
	}
	ts := all[:1]
	for _, t := range all[1:] {
		if slices.Contains(r.opt.Variants, t.name) {
			ts = append(ts, t)
		}
	}
	return ts
}

func (r *runner) allTargets() []target {
	ts := []target{{name: "native (data disk)", dir: r.native}}
	for _, s := range r.env.Shares {
		if !s.Writable {
			continue
		}
		t := target{name: s.Type + " share", dir: filepath.Join(s.Path, ".vmdock-bench", "scratch")}
		switch {
		case s.Type == SyncMount:
			t.name, t.syncPath = "sync mount", s.Path
		case s.Cache != "":
			t.name += " (cache=" + s.Cache + ")"
		}
		ts = append(ts, t)
		if s.Type != SyncMount && len(s.Exclude) > 0 {
			ts = append(ts, target{name: s.Type + " share + exclude", dir: filepath.Join(s.Path, s.Exclude[0], ".vmdock-bench", "scratch"), guestOnly: true})
		}
	}
	return ts
}

func (r *runner) disk(ctx context.Context) error {
	for _, t := range r.targets() {
		f := filepath.Join(t.dir, "seq.bin")
		out, err := r.sh(ctx, fmt.Sprintf("mkdir -p %s && dd if=/dev/zero of=%s bs=1M count=100 conv=fsync 2>&1; rc=$?; rm -f %s; exit $rc", shq(t.dir), shq(f), shq(f)))
		if err != nil {
			r.rep.Skipped = append(r.rep.Skipped, fmt.Sprintf("disk %s: %v", t.name, err))
			continue
		}
		n, secs, err := parseDD(out)
		if err != nil {
			return err
		}
		r.rep.Add(Result{Section: "disk", Metric: "seq write 100MB +fsync", Variant: t.name, Value: float64(n) / 1e6 / secs, Unit: "MB/s", Better: Higher})
	}
	return nil
}

// treePhaseNames are the report's names of probe.TreePhases.
var treePhaseNames = map[string]string{
	probe.PhaseCreate: "create", probe.PhaseWalk: "stat walk", probe.PhaseRead: "read all", probe.PhaseDelete: "delete",
}

// MetricCatchUp prefixes the rows of a sync mount's catch-up after a phase.
const MetricCatchUp = "sync catch-up after "

// phases runs a workload's phases one by one on t. On a sync mount each
// phase starts once the previous one's changes are synced, as in a
// developer's day (install, then serve): the container's file work is
// measured on its own, and the sync's time is a row of its own (done
// after the phase, with the guest otherwise idle). It returns the
// seconds per phase, or the error of the phase that failed.
func (r *runner) phases(ctx context.Context, t target, workload string, phases []string, names map[string]string, args ...string) (times []float64, catchUp []Result, err error) {
	for _, phase := range phases {
		var pt probe.PhaseTime
		if err := r.helperJSON(ctx, &pt, append(append([]string{workload}, args...), "-phase", phase)...); err != nil {
			return times, catchUp, err
		}
		times = append(times, pt.Secs)
		if t.syncPath == "" {
			continue
		}
		if r.env.SyncSettle == nil {
			return times, catchUp, fmt.Errorf("no sync settle hook")
		}
		start := time.Now()
		if err := r.env.SyncSettle(ctx, t.syncPath); err != nil {
			return times, catchUp, fmt.Errorf("sync after %s: %w", phase, err)
		}
		catchUp = append(catchUp, Result{Section: "tree", Metric: MetricCatchUp + names[phase], Variant: t.name, Value: time.Since(start).Seconds(), Unit: "s", Better: Info})
	}
	return times, catchUp, nil
}

func (r *runner) tree(ctx context.Context) error {
	if err := r.needHelper(); err != nil {
		return err
	}
	n := 20000
	if r.opt.Quick {
		n = 2000
	}
	targets := r.targets()
	for _, t := range targets {
		if _, err := r.sh(ctx, "mkdir -p "+shq(t.dir)); err != nil {
			return err
		}
	}
	if err := r.warmUp(ctx, n); err != nil {
		return err
	}
	rounds, errs := interleaved(len(targets), fileRounds, fileRoundBudget(r.opt.Quick), func(i int) (roundResult, error) {
		t := targets[i]
		dir := filepath.Join(t.dir, "tree")
		times, catchUp, err := r.phases(ctx, t, "tree", probe.TreePhases, treePhaseNames, "-dir", dir, "-n", strconv.Itoa(n))
		if err != nil {
			_, _ = r.sh(ctx, "rm -rf "+shq(dir))
		}
		return roundResult{times, catchUp}, err
	})
	rows := make([][]Result, len(probe.TreePhases))
	var catchUps []Result
	for _, m := range r.medians("tree", targets, rounds, errs) {
		for p, phase := range probe.TreePhases {
			rows[p] = append(rows[p], Result{Section: "tree", Metric: fmt.Sprintf("%s %d files", treePhaseNames[phase], n), Variant: m.target.name, Value: m.times[p], Unit: "s", Better: Lower, Note: m.note})
		}
		catchUps = append(catchUps, m.catchUp...)
	}
	// Phase-major order keeps native and shares of one phase together.
	for _, rs := range rows {
		for _, res := range rs {
			r.rep.Add(res)
		}
	}
	if err := r.install(ctx, n); err != nil {
		return err
	}
	for _, res := range catchUps {
		r.rep.Add(res)
	}
	return nil
}

// warmUp creates and deletes the tree once on the guest's disk, unmeasured:
// under TCG the first run of the helper's code pays for its translation,
// which would otherwise count against the first target.
func (r *runner) warmUp(ctx context.Context, n int) error {
	dir := filepath.Join(r.native, "warm-up")
	for _, phase := range []string{probe.PhaseCreate, probe.PhaseDelete} {
		var pt probe.PhaseTime
		if err := r.helperJSON(ctx, &pt, "tree", "-dir", dir, "-n", strconv.Itoa(n), "-phase", phase); err != nil {
			_, _ = r.sh(ctx, "rm -rf "+shq(dir))
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// targetMedian is one target's median round of a file workload, with a
// note saying how many rounds it is the median of.
type targetMedian struct {
	roundResult
	target target
	note   string
}

// medians folds each target's rounds of workload into its median round. A
// target's error goes to the report's skipped lines; a target without a
// finished round has no median.
func (r *runner) medians(workload string, targets []target, rounds [][]roundResult, errs []error) []targetMedian {
	var out []targetMedian
	for i, t := range targets {
		if errs[i] != nil {
			r.rep.Skipped = append(r.rep.Skipped, fmt.Sprintf("%s %s: %v", workload, t.name, errs[i]))
		}
		if len(rounds[i]) == 0 {
			continue
		}
		note := fmt.Sprintf("median of %d rounds", len(rounds[i]))
		if len(rounds[i]) == 1 {
			note = "1 round"
		}
		out = append(out, targetMedian{roundResult: medianRound(rounds[i]), target: t, note: note})
	}
	return out
}

// install is the seeds' workload on each target: unpack a dependency
// tree of n files from a tarball (composer or npm install), then read every
// file (the app serving). The tarball is made on the host once and copied
// to the guest's own disk, so every target unpacks the same bytes from the
// same place.
func (r *runner) install(ctx context.Context, n int) error {
	hostTar := filepath.Join(filepath.Dir(r.helper), "deps.tar")
	if err := probe.MakeTarball(hostTar, n, 11); err != nil {
		return err
	}
	defer os.Remove(hostTar)
	guestTar := filepath.Join(r.native, "deps.tar")
	if _, err := r.sh(ctx, fmt.Sprintf("mkdir -p %s && cp %s %s", shq(r.native), shq(hostTar), shq(guestTar))); err != nil {
		return err
	}
	phases := []string{probe.PhaseUnpack, probe.PhaseRead}
	names := map[string]string{probe.PhaseUnpack: "install: unpack", probe.PhaseRead: "install: read"}
	targets := r.targets()
	rounds, errs := interleaved(len(targets), fileRounds, fileRoundBudget(r.opt.Quick), func(i int) (roundResult, error) {
		t := targets[i]
		dir := filepath.Join(t.dir, "install")
		times, catchUp, err := r.phases(ctx, t, "install", phases, names, "-tar", guestTar, "-dir", dir)
		_, _ = r.sh(ctx, "rm -rf "+shq(dir))
		if t.syncPath != "" && r.env.SyncSettle != nil {
			_ = r.env.SyncSettle(ctx, t.syncPath) // the next round starts from a settled sync
		}
		return roundResult{times, catchUp}, err
	})
	var unpack, read, catchUps []Result
	for _, m := range r.medians("install", targets, rounds, errs) {
		unpack = append(unpack, Result{Section: "tree", Metric: fmt.Sprintf("install: unpack %d files", n), Variant: m.target.name, Value: m.times[0], Unit: "s", Better: Lower, Note: m.note})
		read = append(read, Result{Section: "tree", Metric: fmt.Sprintf("install: then read all %d", n), Variant: m.target.name, Value: m.times[1], Unit: "s", Better: Lower, Note: m.note})
		catchUps = append(catchUps, m.catchUp...)
	}
	for _, res := range append(append(unpack, read...), catchUps...) {
		r.rep.Add(res)
	}
	return nil
}

// guestServer runs the helper's echo server in the guest on port until
// the returned stop is called.
func (r *runner) guestServer(ctx context.Context, bind string, port int) (stop func(), err error) {
	pr, pw := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		code, err := r.env.Exec(ctx, []string{r.helper, "serve", "-addr", net.JoinHostPort(bind, strconv.Itoa(port)), "-max", "15m"}, pr, outW, &errb)
		if err == nil && code != 0 {
			err = fmt.Errorf("exited %d: %s", code, strings.TrimSpace(errb.String()))
		}
		outW.CloseWithError(io.EOF)
		done <- err
	}()
	stop = func() {
		pw.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}
	line, err := bufio.NewReader(outR).ReadString('\n')
	go io.Copy(io.Discard, outR)
	if err != nil {
		stop()
		return nil, fmt.Errorf("guest echo server: %v %v", err, <-done)
	}
	slog.Debug("guest echo server", "ready", strings.TrimSpace(line))
	return stop, nil
}

// waitForwarded waits until the host agent forwards the guest port: the
// port watcher polls, so a fresh listener takes a moment to appear.
func waitForwarded(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := probe.EchoLatency(cctx, probe.TCPDialer(addr), 1, 1, 8)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("guest port not forwarded to %s within %s: %w", addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (r *runner) streamBytes() int64 {
	if r.opt.Quick {
		return 16 << 20
	}
	return 64 << 20
}

func (r *runner) ports(ctx context.Context) error {
	if err := r.needHelper(); err != nil {
		return err
	}
	if r.env.ContainerdSocket != "" {
		// A guest socket's forward does not depend on the runtime (the
		// docker run measures it); what differs is nerdctl's DNAT path.
		return r.portsNerdctl(ctx, r.streamBytes())
	}
	// Two guest servers side by side: one on the guest's wildcard, which
	// the host agent forwards on the direct path where the VM's network
	// allows it, and one on the guest's loopback only, which always goes
	// through the agent tunnel.
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("pick a port: %w", err)
	}
	tport, err := freePort()
	if err != nil {
		return fmt.Errorf("pick a port: %w", err)
	}
	stop, err := r.guestServer(ctx, "0.0.0.0", port)
	if err != nil {
		return err
	}
	defer stop()
	tstop, err := r.guestServer(ctx, "127.0.0.1", tport)
	if err != nil {
		return err
	}
	defer tstop()
	hostAddr := fmt.Sprintf("127.0.0.1:%d", port)
	tunnelAddr := fmt.Sprintf("127.0.0.1:%d", tport)
	for _, a := range []string{hostAddr, tunnelAddr} {
		if err := waitForwarded(ctx, a, 60*time.Second); err != nil {
			return err
		}
	}
	hostVariant := r.waitPath(ctx, port)
	guestAddr := hostAddr // the guest loopback has the same address

	n := r.streamBytes()
	metric := fmt.Sprintf("echo stream %dMB", n>>20)
	if err := r.streamBothSides(ctx, hostAddr, n, metric, "guest loopback", hostVariant); err != nil {
		return err
	}
	if d, err := probe.EchoThroughput(ctx, probe.TCPDialer(tunnelAddr), n); err == nil {
		r.rep.Add(Result{Section: "ports", Metric: metric, Variant: "agent tunnel", Value: float64(n) / 1e6 / d.Seconds(), Unit: "MB/s", Better: Higher})
	} else {
		return err
	}
	if err := r.guestToHost(ctx, metric, n); err != nil {
		r.rep.Skipped = append(r.rep.Skipped, "ports guest->host: "+err.Error())
	}

	if err := r.portsLatency(ctx, guestAddr, hostAddr, tunnelAddr, hostVariant); err != nil {
		return err
	}
	if err := r.portScan(ctx); err != nil {
		r.rep.Skipped = append(r.rep.Skipped, "ports scan cost: "+err.Error())
	}
	return nil
}

// portsLatency measures connect+echo latency to the guest server at
// guestAddr from the guest itself, through the host's forward at hostAddr
// (the path hostVariant names) and through the agent tunnel at tunnelAddr,
// with one connection and with 50 side by side.
func (r *runner) portsLatency(ctx context.Context, guestAddr, hostAddr, tunnelAddr, hostVariant string) error {
	rounds1, rounds50 := 100, 10
	if r.opt.Quick {
		rounds1, rounds50 = 40, 4
	}
	for _, c := range []struct{ conns, rounds int }{{1, rounds1}, {50, rounds50}} {
		var g struct{ US []int64 }
		if err := r.helperJSON(ctx, &g, "echo", "-addr", guestAddr, "-conns", strconv.Itoa(c.conns), "-rounds", strconv.Itoa(c.rounds), "-size", "64"); err != nil {
			return err
		}
		h, err := probe.EchoLatency(ctx, probe.TCPDialer(hostAddr), c.conns, c.rounds, 64)
		if err != nil {
			return err
		}
		ht, err := probe.EchoLatency(ctx, probe.TCPDialer(tunnelAddr), c.conns, c.rounds, 64)
		if err != nil {
			return err
		}
		for _, p := range []float64{50, 99} {
			m := fmt.Sprintf("connect+echo p%.0f, %d conn", p, c.conns)
			r.rep.Add(Result{Section: "ports", Metric: m, Variant: "guest loopback", Value: ms(Percentile(micros(g.US), p)), Unit: "ms", Better: Lower})
			r.rep.Add(Result{Section: "ports", Metric: m, Variant: hostVariant, Value: ms(Percentile(h, p)), Unit: "ms", Better: Lower})
			r.rep.Add(Result{Section: "ports", Metric: m, Variant: "agent tunnel", Value: ms(Percentile(ht, p)), Unit: "ms", Better: Lower})
		}
	}
	return nil
}

// portsNerdctl streams through a port nerdctl published (a CNI portmap
// DNAT rule, no listening socket in the guest), from the guest and from
// the host. It needs the test image (vmdock-test:latest, TCP echo on 82)
// loaded into containerd.
func (r *runner) portsNerdctl(ctx context.Context, n int64) error {
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("pick a port: %w", err)
	}
	out, err := r.run(ctx, []string{"nerdctl", "run", "-d", "-p", fmt.Sprintf("%d:82", port), "vmdock-test:latest"})
	if err != nil {
		return fmt.Errorf("start the echo container (load vmdock-test:latest with `vmdock nerdctl load` first): %w", err)
	}
	id := strings.TrimSpace(lastLines(out, 1))
	defer r.run(context.WithoutCancel(ctx), []string{"nerdctl", "rm", "-f", id})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitForwarded(ctx, addr, 60*time.Second); err != nil {
		return err
	}
	metric := fmt.Sprintf("nerdctl -p echo stream %dMB (containerd)", n>>20)
	return r.streamBothSides(ctx, addr, n, metric, "guest (through the DNAT rule)", "host->container forward")
}

// waitPath waits briefly for the direct path of a wildcard guest port
// (it opens just after the port is forwarded) and names the row's variant
// after the path the port ended up on.
func (r *runner) waitPath(ctx context.Context, port int) string {
	if r.env.PortPath == nil {
		return "host->guest forward"
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		path := r.env.PortPath(ctx, "tcp", port)
		if path == "direct" {
			return "direct path"
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "host->guest forward (" + path + ")"
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// streamBothSides echoes n bytes through addr from the guest (the helper;
// the guest reaches a forwarded port at the same address) and then from
// the host, and adds a row for each.
func (r *runner) streamBothSides(ctx context.Context, addr string, n int64, metric, guestVariant, hostVariant string) error {
	var gs struct{ Seconds float64 }
	if err := r.helperJSON(ctx, &gs, "stream", "-addr", addr, "-bytes", strconv.FormatInt(n, 10)); err != nil {
		return err
	}
	r.rep.Add(Result{Section: "ports", Metric: metric, Variant: guestVariant, Value: float64(n) / 1e6 / gs.Seconds, Unit: "MB/s", Better: Higher})
	d, err := probe.EchoThroughput(ctx, probe.TCPDialer(addr), n)
	if err != nil {
		return err
	}
	r.rep.Add(Result{Section: "ports", Metric: metric, Variant: hostVariant, Value: float64(n) / 1e6 / d.Seconds(), Unit: "MB/s", Better: Higher})
	return nil
}

// portScan measures what the guest agent's port watch pays per listing
// with the /proc/net parser it used to have and the sock_diag query it has
// now: first with the sockets the guest has (after the latency runs above,
// many in TIME_WAIT), then with 500 more established connections.
func (r *runner) portScan(ctx context.Context) error {
	scans := 200
	if r.opt.Quick {
		scans = 50
	}
	for _, conns := range []int{0, 500} {
		var cost struct {
			Sockets           int
			ProcNet, SockDiag struct{ CPUms float64 }
		}
		if err := r.helperJSON(ctx, &cost, "portscan", "-conns", strconv.Itoa(conns), "-n", strconv.Itoa(scans)); err != nil {
			return err
		}
		m := fmt.Sprintf("port scan CPU, %d sockets in guest", cost.Sockets)
		r.rep.Add(Result{Section: "ports", Metric: m, Variant: "/proc/net parse (before)", Value: cost.ProcNet.CPUms, Unit: "ms", Better: Lower})
		r.rep.Add(Result{Section: "ports", Metric: m, Variant: "sock_diag (now)", Value: cost.SockDiag.CPUms, Unit: "ms", Better: Lower})
	}
	return nil
}

// guestToHost streams from the guest to an echo server on the host's
// loopback through the host-access address.
func (r *runner) guestToHost(ctx context.Context, metric string, n int64) error {
	if r.env.HostAccessIP == "" {
		return fmt.Errorf("no host access address configured")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go probe.ServeEcho(ln)
	port := ln.Addr().(*net.TCPAddr).Port
	var gs struct{ Seconds float64 }
	addr := net.JoinHostPort(r.env.HostAccessIP, strconv.Itoa(port))
	if err := r.helperJSON(ctx, &gs, "stream", "-addr", addr, "-bytes", strconv.FormatInt(n, 10)); err != nil {
		return err
	}
	r.rep.Add(Result{Section: "ports", Metric: metric, Variant: "guest->host (" + r.env.HostAccessIP + ")", Value: float64(n) / 1e6 / gs.Seconds, Unit: "MB/s", Better: Higher})
	return nil
}

func (r *runner) api(ctx context.Context) error {
	if err := r.needHelper(); err != nil {
		return err
	}
	n := 50
	if r.opt.Quick {
		n = 20
	}
	if r.env.ContainerdSocket != "" {
		return r.apiContainerd(ctx, n)
	}
	host := probe.UnixHTTPClient(r.env.DockerSocket)
	for _, path := range []string{"/_ping", "/containers/json"} {
		var g struct{ US []int64 }
		if err := r.helperJSON(ctx, &g, "http", "-sock", "/var/run/docker.sock", "-path", path, "-n", strconv.Itoa(n)); err != nil {
			return err
		}
		h, err := probe.HTTPLatency(ctx, host, "http://docker"+path, n)
		if err != nil {
			return fmt.Errorf("host docker socket: %w", err)
		}
		gp50, hp50 := Percentile(micros(g.US), 50), Percentile(h, 50)
		m := "GET " + path + " p50"
		r.rep.Add(Result{Section: "api", Metric: m, Variant: "in guest", Value: ms(gp50), Unit: "ms", Better: Lower})
		r.rep.Add(Result{Section: "api", Metric: m, Variant: "host socket", Value: ms(hp50), Unit: "ms", Better: Lower,
			Note: fmt.Sprintf("+%.2f ms", ms(hp50-gp50))})
	}
	return nil
}

// apiContainerd is the api section for the containerd runtime: gRPC
// Version calls (what nerdctl and other clients make first) through the
// tunnelled socket against the same calls in the guest.
func (r *runner) apiContainerd(ctx context.Context, n int) error {
	var g struct{ US []int64 }
	if err := r.helperJSON(ctx, &g, "grpc", "-sock", guestContainerdSocket, "-n", strconv.Itoa(n)); err != nil {
		return err
	}
	h, err := probe.GRPCLatency(ctx, r.env.ContainerdSocket, probe.ContainerdVersionURL, n)
	if err != nil {
		return fmt.Errorf("host containerd socket: %w", err)
	}
	gp50, hp50 := Percentile(micros(g.US), 50), Percentile(h, 50)
	m := "gRPC Version p50 (containerd)"
	r.rep.Add(Result{Section: "api", Metric: m, Variant: "in guest", Value: ms(gp50), Unit: "ms", Better: Lower})
	r.rep.Add(Result{Section: "api", Metric: m, Variant: "host socket", Value: ms(hp50), Unit: "ms", Better: Lower,
		Note: fmt.Sprintf("+%.2f ms", ms(hp50-gp50))})
	return nil
}

// guestContainerdSocket is containerd's socket in the guest.
const guestContainerdSocket = "/run/containerd/containerd.sock"

func (r *runner) boot(context.Context) error {
	b := r.env.Boot
	if len(b.Steps) == 0 {
		return fmt.Errorf("the host agent reported no boot steps (is the instance ready?)")
	}
	total := 0.0
	for _, s := range b.Steps {
		total += s.Seconds
		r.rep.Add(Result{Section: "boot", Metric: "step " + s.Step, Variant: "vmdock", Value: s.Seconds, Unit: "s", Better: Info})
	}
	if b.HelloUptime > 0 {
		r.rep.Add(Result{Section: "boot", Metric: MetricGuestToHello, Variant: "vmdock start", Value: b.HelloUptime, Unit: "s", Better: Info})
	}
	// Against the raw-boot baseline (`vmdock bench --raw-boot`, run by
	// `make bench` on the stopped instance before this start) when the
	// report has one.
	toHello, better := 0.0, Info
	for _, s := range b.Steps {
		toHello += s.Seconds
		if s.Step == "agent" {
			break
		}
	}
	for _, res := range r.rep.Results {
		if res.Section == "boot" && res.Metric == MetricToHello {
			better = Lower
		}
	}
	r.rep.Add(Result{Section: "boot", Metric: MetricToHello, Variant: "vmdock start", Value: toHello, Unit: "s", Better: better})
	r.rep.Add(Result{Section: "boot", Metric: "total to ready", Variant: "vmdock", Value: total, Unit: "s", Better: Info})
	return nil
}

func (r *runner) rssRows(ctx context.Context, variant string) []Result {
	var out []Result
	add := func(who string, mib float64, err error) {
		if err != nil && ctx.Err() != nil {
			return // the load ended during this sample: nothing to report
		}
		if err != nil {
			r.rep.Skipped = append(r.rep.Skipped, fmt.Sprintf("memory %s (%s): %v", who, variant, err))
			return
		}
		out = append(out, Result{Section: "memory", Metric: "RSS " + who, Variant: variant, Value: mib, Unit: "MiB", Better: Info})
	}
	if r.env.HostAgentPID > 0 {
		v, private, hasPrivate, err := hostRSS(r.env.HostAgentPID)
		add("host agent", v, err)
		if hasPrivate {
			add("host agent, private (RssAnon)", private, nil)
		}
	}
	if r.env.VMPID > 0 {
		v, _, _, err := hostRSS(r.env.VMPID)
		add("VM process", v, err)
	}
	st, err := r.sh(ctx, `cat /proc/$(pgrep -xo vmdock-agent)/status`)
	if err == nil {
		v, perr := parseVmRSS(st)
		add("guest agent", v, perr)
		anon, aerr := parseStatusMiB(st, "RssAnon")
		add("guest agent, private (RssAnon)", anon, aerr)
	} else {
		add("guest agent", 0, err)
	}
	return out
}

// idleCPU is the guest agent's CPU use while nothing happens but its own
// port watch and keep-alives, as a percentage of one vCPU.
func (r *runner) idleCPU(ctx context.Context) (float64, error) {
	secs := 30
	if r.opt.Quick {
		secs = 10
	}
	// utime and stime are fields 14 and 15 of /proc/PID/stat, in clock
	// ticks; the comm field (vmdock-agent) has no spaces to shift them.
	// This exec is itself host activity, which keeps the port watch on its
	// fast period for 10 s: the window starts after that.
	out, err := r.sh(ctx, fmt.Sprintf(`sleep 11 && p=$(pgrep -xo vmdock-agent) && a=$(cut -d' ' -f14,15 /proc/$p/stat) && sleep %d && b=$(cut -d' ' -f14,15 /proc/$p/stat) && echo $a $b $(getconf CLK_TCK)`, secs))
	if err != nil {
		return 0, err
	}
	var u0, s0, u1, s1, hz float64
	if _, err := fmt.Sscan(out, &u0, &s0, &u1, &s1, &hz); err != nil || hz == 0 {
		return 0, fmt.Errorf("guest agent stat: %q", out)
	}
	return (u1 + s1 - u0 - s0) / hz / float64(secs) * 100, nil
}

// idleSettle is how long the memory section waits without activity before
// its idle sample.
const idleSettle = 25 * time.Second

func (r *runner) memory(ctx context.Context) error {
	if pct, err := r.idleCPU(ctx); err != nil {
		r.rep.Skipped = append(r.rep.Skipped, "guest agent idle CPU: "+err.Error())
	} else {
		r.rep.Add(Result{Section: "memory", Metric: "CPU guest agent, % of a vCPU", Variant: "idle", Value: pct, Unit: "%", Better: Info})
	}
	// Idle is what a user's machine sees between bursts: both agents hand
	// memory back once quiet (the guest 10 s after the host's last stream,
	// the host agent within two 10 s periods), and the execs above were
	// activity.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idleSettle):
	}
	idle := r.rssRows(ctx, "idle")
	var load []Result
	if r.helper != "" {
		var err error
		if load, err = r.rssUnderLoad(ctx); err != nil {
			r.rep.Skipped = append(r.rep.Skipped, "memory under load: "+err.Error())
		}
	}
	for _, res := range idle {
		r.rep.Add(res)
		for _, l := range load {
			if l.Metric == res.Metric {
				r.rep.Add(l)
			}
		}
	}
	return nil
}

// rssUnderLoad samples RSS while the host pushes streams and 50 parallel
// connections through the port forwarder; it keeps the peak per process.
func (r *runner) rssUnderLoad(ctx context.Context) ([]Result, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	stop, err := r.guestServer(ctx, "0.0.0.0", port)
	if err != nil {
		return nil, err
	}
	defer stop()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitForwarded(ctx, addr, 60*time.Second); err != nil {
		return nil, err
	}
	loadCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var loadErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		if _, err := probe.EchoThroughput(loadCtx, probe.TCPDialer(addr), r.streamBytes()); err != nil {
			loadErr = err
			return
		}
		if _, err := probe.EchoLatency(loadCtx, probe.TCPDialer(addr), 50, 4, 4096); err != nil {
			loadErr = err
		}
	}()
	peak := map[string]Result{}
	var order []string
	for loadCtx.Err() == nil {
		for _, res := range r.rssRows(loadCtx, "port-forward load (peak)") {
			if old, ok := peak[res.Metric]; !ok || res.Value > old.Value {
				if !ok {
					order = append(order, res.Metric)
				}
				peak[res.Metric] = res
			}
		}
		select {
		case <-loadCtx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	wg.Wait()
	if loadErr != nil {
		return nil, loadErr
	}
	var out []Result
	for _, m := range order {
		out = append(out, peak[m])
	}
	return out, nil
}

// shq quotes s for /bin/sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
