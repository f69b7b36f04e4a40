package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/bench"
	"github.com/vmdock/vmdock/bench/scratch"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/qemu"
	"github.com/vmdock/vmdock/vm/store"
)

// benchFlags are bench's command-line flags.
type benchFlags struct {
	sections, jsonPath, svgPath, helper, appendPath, versus, busybox string
	quick, rawBoot, resumeCycle                                      bool
	variants                                                         []string
}

func newBenchCmd(g *globals) *cobra.Command {
	var fl benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the running instance: shares vs native disk, port forwarding, Docker API, container domains, boot, memory, disk sync, host cost; a remote engine's session",
		Long: "bench measures a running instance and prints each metric next to its baseline from the same run\n" +
			"(native disk for shares, guest loopback for forwarded ports, in-guest socket for the Docker API,\n" +
			"--disk-sync none for the other sync modes, on scratch disks hot-plugged into this VM, qemu only;\n" +
			"the agent tunnel the container-domains router rides on, against the target of 0.8x).\n" +
			"Sections: " + fmt.Sprint(bench.Sections) + ". tree, ports and api need the guest helper\n" +
			"(`make bench` builds it into bin/), found next to the vmdock binary or given with --helper.\n" +
			"domains needs the router on (domains.enabled, free ports) and the vmdock-test image loaded (`make bench` loads it).\n" +
			"network compares the network paths (published port direct and tunnelled, a download from the host's loopback);\n" +
			"with --versus PROFILE a second running instance (say slirp beside gvisor) is measured in the same rounds, interleaved.\n" +
			"cost takes a few minutes (3 under TCG): it allocates 1 GiB in the guest, writes and deletes 1 GiB on the data disk,\n" +
			"and sets the idle period to 10s until the VM pauses, then puts the period back.\n" +
			"remote is a remote instance's (vmdock start --remote), and its only one: the Docker API through the instance's\n" +
			"docker.sock against OpenSSH's own forward of the engine's socket (ssh -L, the same ssh command), and a busybox\n" +
			"httpd container's download and connect+first byte at the server's address, through ssh -L and on localhost.",
		Example: `  vmdock bench --quick
  vmdock bench --sections disk,tree --json bench.json --svg bench.svg
  vmdock bench -p gv --sections network --versus slirp
  vmdock bench -p big --sections remote`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, g, &fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.sections, "sections", "", "comma-separated sections to run (default: every VM section, or remote on a remote instance)")
	f.StringVar(&fl.jsonPath, "json", "", "write the report as JSON to this file")
	f.StringVar(&fl.svgPath, "svg", "", "write a bar chart of the ratios to this SVG file")
	f.StringVar(&fl.appendPath, "append", "", "add this run's results to the JSON report in this file (created if missing)")
	f.StringVar(&fl.versus, "versus", "", "network section: another running profile measured beside this one, rounds interleaved (e.g. one on slirp, one on gvisor)")
	f.StringVar(&fl.busybox, "busybox", "", "remote section: a static Linux busybox for the server's arch, run there as the published port's file server (imported, never pulled); default: "+defaultBusybox)
	f.StringVar(&fl.helper, "helper", "", "guest helper binary (linux, static); default: vmdock-bench-helper-linux-<arch> next to vmdock")
	f.StringSliceVar(&fl.variants, "variants", nil, `only these targets in the file sections, e.g. "sync mount,virtiofs share + exclude" (the native disk always runs)`)
	f.BoolVar(&fl.quick, "quick", false, "smaller workloads (2000 files instead of 20000, 16 MB streams)")
	f.BoolVar(&fl.resumeCycle, "resume-cycle", false, "on a stopped instance that can be saved: time a cold start, a saving stop, a resuming start and a powering-off stop, side by side (fast start against cold boot)")
	f.BoolVar(&fl.rawBoot, "raw-boot", false, "on a stopped qemu instance: boot its last VM spec with the driver alone and record the time to the agent's hello (the boot section's baseline)")
	return cmd
}

// runBench runs the sections on the running instance, or one of the
// stopped-instance timings, and writes the report where the flags say.
func runBench(cmd *cobra.Command, g *globals, fl *benchFlags) error {
	secs, err := bench.ParseSections(fl.sections)
	if err != nil {
		return err
	}
	inst, err := g.existing()
	if err != nil {
		return err
	}
	if err := refuseOnRemote(inst, g.host, fl); err != nil {
		return err
	}
	ctx := cmd.Context()
	if fl.rawBoot {
		return runRawBoot(cmd, inst, g.host, fl.appendPath, fl.jsonPath)
	}
	if fl.resumeCycle {
		return runResumeCycle(cmd, inst, g.host, fl.appendPath, fl.jsonPath)
	}
	if st := instance.Status(ctx, inst); st.State != instance.StateRunning {
		return fmt.Errorf("profile %q is not running (%s); start it with `vmdock start -p %s`", inst.Name, st, inst.Name)
	}
	cfg, err := inst.LoadConfig(g.host)
	if err != nil {
		return err
	}
	if strings.TrimSpace(fl.sections) == "" {
		secs = bench.DefaultSections(cfg.IsRemote())
	}
	env, m, err := instanceBenchEnv(cmd, inst, cfg, fl)
	if err != nil {
		return err
	}
	rep, err := benchReport(fl.appendPath, m)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if err := bench.WriteMachine(out, m); err != nil {
		return err
	}
	opts := bench.Options{Sections: secs, Quick: fl.quick, Variants: fl.variants, Helper: fl.helper, Progress: cmd.ErrOrStderr()}
	if opts.Helper == "" {
		opts.Helper = defaultHelper(cfg.Arch)
	}
	if fl.versus != "" {
		if opts.Versus, err = versusEnv(cmd, g, fl.versus, inst); err != nil {
			return err
		}
	}
	err = bench.Run(ctx, env, opts, rep)
	if err != nil {
		return err
	}
	if err := bench.WriteTable(out, rep); err != nil {
		return err
	}
	return writeBenchFiles(fl, rep, m)
}

// instanceBenchEnv is the bench Env of a VM instance or a remote one.
func instanceBenchEnv(cmd *cobra.Command, inst *store.Instance, cfg config.Config, fl *benchFlags) (bench.Env, bench.Machine, error) {
	if cfg.IsRemote() {
		return remoteBenchEnv(cmd, inst, cfg, fl.busybox)
	}
	return benchEnv(cmd, inst, cfg)
}

// refuseOnRemote turns down the flags that need a VM when the instance is
// a remote one: it boots none and has no second instance's network to
// compare.
func refuseOnRemote(inst *store.Instance, h config.Host, fl *benchFlags) error {
	cfg, err := inst.LoadConfig(h)
	if err != nil || !cfg.IsRemote() {
		return nil // a config that does not load fails later, where it always did
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"--raw-boot", fl.rawBoot}, {"--resume-cycle", fl.resumeCycle}, {"--versus", fl.versus != ""}} {
		if f.set {
			return fmt.Errorf("%s: profile %q is a remote instance (%s) and boots no VM; accepted there: --sections %s", f.name, inst.Name, cfg.Remote.URL, bench.SectionRemote)
		}
	}
	return nil
}

// versusEnv is the bench Env of the running profile name, the network
// section's second instance.
func versusEnv(cmd *cobra.Command, g *globals, name string, self *store.Instance) (*bench.Env, error) {
	home, err := store.Home()
	if err != nil {
		return nil, err
	}
	inst, err := store.Open(home, name)
	if err != nil {
		return nil, fmt.Errorf("--versus: %w", err)
	}
	if inst.Dir == self.Dir {
		return nil, fmt.Errorf("--versus %s: the profile measured already; accepted: another running profile", name)
	}
	cfg, err := inst.LoadConfig(g.host)
	if err != nil {
		return nil, err
	}
	if cfg.IsRemote() {
		return nil, fmt.Errorf("--versus %s: a remote instance (%s) has no VM network to compare; accepted: a running VM profile", name, cfg.Remote.URL)
	}
	if st := instance.Status(cmd.Context(), inst); st.State != instance.StateRunning {
		return nil, fmt.Errorf("--versus %s: not running (%s); accepted: a running profile", name, st)
	}
	env, _, err := benchEnv(cmd, inst, cfg)
	if err != nil {
		return nil, fmt.Errorf("--versus %s: %w", name, err)
	}
	return &env, nil
}

// benchReport is the report this run adds to: the one in appendPath if
// given, else a new one for machine m.
func benchReport(appendPath string, m bench.Machine) (*bench.Report, error) {
	rep := &bench.Report{}
	if appendPath != "" {
		var err error
		if rep, err = loadReport(appendPath); err != nil {
			return nil, err
		}
	}
	if rep.Time == "" {
		rep.Time = time.Now().UTC().Format(time.RFC3339)
		rep.Machine = m
	}
	return rep, nil
}

// writeBenchFiles writes the report as JSON and as a chart where the flags
// ask for them.
func writeBenchFiles(fl *benchFlags, rep *bench.Report, m bench.Machine) error {
	for _, p := range []string{fl.jsonPath, fl.appendPath} {
		if p != "" {
			if err := bench.WriteJSON(p, rep); err != nil {
				return err
			}
		}
	}
	if fl.svgPath == "" {
		return nil
	}
	f, err := os.Create(fl.svgPath)
	if err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	werr := bench.WriteSVG(f, rep, "vmdock bench — "+m.Driver+"/"+m.Accel)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write chart %s: %w", fl.svgPath, werr)
	}
	return nil
}

// benchEnv gathers what the runner needs from the instance.
func benchEnv(cmd *cobra.Command, inst *store.Instance, cfg config.Config) (bench.Env, bench.Machine, error) {
	ctx := cmd.Context()
	env := bench.Env{
		Exec: func(ctx2 context.Context, argv []string, in io.Reader, out, errw io.Writer) (int, error) {
			return execVM(ctx2, inst, argv, in, out, errw)
		},
		DockerSocket: inst.DockerSocketPath(),
		HostAccessIP: cfg.Network.HostAccessIP,
	}
	if cfg.Runtime == config.RuntimeContainerd {
		env.DockerSocket, env.ContainerdSocket = "", inst.ContainerdSocketPath()
	}
	env.Shares = benchShares(cfg)
	env.PortPath = func(ctx context.Context, proto string, guestPort int) string {
		st, err := instance.HostAgentState(ctx, inst)
		if err != nil {
			return ""
		}
		for _, p := range st.Ports {
			if p.Proto == proto && p.GuestPort == guestPort {
				return p.Path
			}
		}
		return ""
	}
	ctl := control.NewClient(inst.ControlSocketPath())
	env.Cost, env.SetIdle, env.IdleAfter = benchCostFunc(ctl), ctl.SetIdle, time.Duration(cfg.Idle)
	env.DialGuest = benchDialGuest(ctl)
	if cfg.Domains.Enabled {
		env.DomainRoute = benchDomainRoute(inst)
	}
	if len(mounts.Syncs(cfg.Mounts)) > 0 {
		c := ctl
		env.SyncFlush = c.SyncFlush
		env.SyncSettle = func(ctx context.Context, path string) error {
			return bench.Settle(ctx,
				func(ctx context.Context) error { return c.SyncFlush(ctx, path) },
				func(ctx context.Context) (bench.SyncState, error) { return syncState(ctx, c, path) },
				bench.SettleQuiet)
		}
	}
	m := bench.HostMachine()
	m.Driver, m.GuestCPUs, m.GuestMemGiB, m.DiskSync = cfg.VMType, cfg.CPUs, cfg.MemoryGiB, cfg.DiskSync
	st, err := instance.HostAgentState(ctx, inst)
	if err != nil {
		return env, m, fmt.Errorf("ask the host agent: %w", err)
	}
	env.HostAgentPID, env.VMPID = st.PID, st.Machine.PID
	env.NetStack = cfg.Network.Stack
	if st.Network != nil {
		env.NetStack = st.Network.Stack
	}
	if st.Machine.Driver != "" {
		m.Driver = st.Machine.Driver
	}
	env.Scratch, env.NoScratch = scratchDisks(inst, m.Driver)
	m.Accel, m.QEMUVersion = st.Machine.Accel, st.Machine.Version
	env.Boot = benchBoot(st.Boot)
	if st.Boot != nil {
		m.GuestKernel = st.Boot.GuestKernel
	}
	return env, m, nil
}

// syncState is the engine's state of the sync mount at hostPath.
func syncState(ctx context.Context, c *control.Client, hostPath string) (bench.SyncState, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return bench.SyncState{}, err
	}
	for _, s := range st.Syncs {
		if s.HostPath == hostPath {
			return bench.SyncState{State: s.State, LastSync: s.LastSync}, nil
		}
	}
	return bench.SyncState{}, fmt.Errorf("no sync mount at %s", hostPath)
}

// benchBoot is the host agent's boot report as the bench reads it.
func benchBoot(r *control.BootReport) bench.Boot {
	if r == nil {
		return bench.Boot{}
	}
	b := bench.Boot{HelloUptime: r.GuestUptime}
	for _, s := range r.Steps {
		b.Steps = append(b.Steps, bench.StepTime{Step: s.Step, Seconds: s.Seconds})
	}
	return b
}

// benchShares are the instance's shares the file sections can use: the
// helper and scratch paths assume the guest sees a share at its host path.
func benchShares(cfg config.Config) []bench.Share {
	var out []bench.Share
	for _, sh := range mounts.Shares(cfg.Mounts, cfg.MountType) {
		if sh.GuestPath == sh.HostPath {
			out = append(out, bench.Share{Path: sh.HostPath, Type: sh.Type, Cache: sh.Cache, Writable: !sh.ReadOnly, Exclude: sh.Exclude})
		}
	}
	// Sync mounts last: the helper goes into the first writable share, and
	// a synced copy of it would reach the guest only after a sync cycle.
	for _, sy := range mounts.Syncs(cfg.Mounts) {
		if sy.GuestPath == sy.HostPath {
			out = append(out, bench.Share{Path: sy.HostPath, Type: bench.SyncMount, Writable: true})
		}
	}
	return out
}

// scratchDisks is how the sync section hot-plugs its disks: through the
// host agent, which owns the hypervisor. Only QEMU takes a disk while the
// VM runs; vz would need a reboot, which would compare boots again.
func scratchDisks(inst *store.Instance, vmDriver string) (bench.ScratchDisks, string) {
	if vmDriver != driver.TypeQEMU {
		return nil, fmt.Sprintf("the %s driver cannot attach a disk to a running VM, so the --disk-sync modes cannot be compared within one boot (compare them across restarts with `vmdock start --disk-sync <mode>`)", vmDriver)
	}
	return scratch.Client{HTTP: control.NewClient(inst.ControlSocketPath()).HTTP()}, ""
}

// benchRoutes are the bench's routes on the host agent's control socket
// (hostagent.Options.Routes): the scratch disks scratchDisks hot-plugs
// through it. The host agent serves them without importing the bench.
func benchRoutes(machine func() driver.Machine) map[string]http.Handler {
	return map[string]http.Handler{
		"POST " + scratch.Path: scratch.Handler(func() any {
			if m := machine(); m != nil {
				return m
			}
			return nil
		}),
	}
}

// defaultHelper is where `make bench` (hack/bench/run.sh) puts the guest helper: beside
// the vmdock binary.
func defaultHelper(arch string) string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(exe), "vmdock-bench-helper-linux-"+arch)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

func loadReport(path string) (*bench.Report, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return &bench.Report{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read bench report: %w", err)
	}
	var r bench.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench report %s: not a vmdock bench JSON file: %w", path, err)
	}
	return &r, nil
}

// runRawBoot records the boot section's baseline: the instance's last VM
// spec booted by the QEMU driver alone. It needs the instance stopped (the
// same disks) and holds its lock while the VM runs.
func runRawBoot(cmd *cobra.Command, inst *store.Instance, h config.Host, paths ...string) error {
	ctx := cmd.Context()
	cfg, err := inst.LoadConfig(h)
	if err != nil {
		return err
	}
	if cfg.VMType != driver.TypeQEMU {
		return fmt.Errorf("--raw-boot: vm type %q: the raw-boot baseline is measured with qemu only", cfg.VMType)
	}
	lock, err := instance.Lock(ctx, inst)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if st := instance.Status(ctx, inst); st.State == instance.StateRunning {
		return fmt.Errorf("--raw-boot: profile %q is running; stop it first (the baseline boots the same disks)", inst.Name)
	}
	b, err := os.ReadFile(inst.SpecPath())
	if err != nil {
		return fmt.Errorf("--raw-boot needs the spec of an earlier boot (start the instance once): %w", err)
	}
	var spec driver.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("--raw-boot: %s: %w", inst.SpecPath(), err)
	}
	bctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	took, uptime, err := bench.RawBoot(bctx, qemu.New(qemu.Options{}), spec)
	if err != nil {
		return err
	}
	rep := &bench.Report{}
	for _, p := range paths {
		if p != "" {
			if rep, err = loadReport(p); err != nil {
				return err
			}
			break
		}
	}
	if rep.Time == "" {
		rep.Time = time.Now().UTC().Format(time.RFC3339)
		rep.Machine = bench.HostMachine()
	}
	rep.Add(bench.Result{Section: "boot", Metric: bench.MetricToHello, Variant: "qemu alone (raw boot)", Value: took.Seconds(), Unit: "s", Better: bench.Lower})
	rep.Add(bench.Result{Section: "boot", Metric: bench.MetricGuestToHello, Variant: "qemu alone (raw boot)", Value: uptime, Unit: "s", Better: bench.Info})
	fmt.Fprintf(cmd.OutOrStdout(), "raw boot to agent hello: %.1fs (guest uptime %.1fs)\n", took.Seconds(), uptime)
	for _, p := range paths {
		if p != "" {
			if err := bench.WriteJSON(p, rep); err != nil {
				return err
			}
		}
	}
	return nil
}
