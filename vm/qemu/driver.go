package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/sockpath"
)

// Options tune the driver; the zero value finds everything on PATH and in
// the usual install locations.
type Options struct {
	// Binary overrides the qemu-system-* executable (otherwise from PATH,
	// by Spec.Arch).
	Binary string
	// Virtiofsd overrides the virtiofs daemon (otherwise PATH, then the
	// distribution locations).
	Virtiofsd string
	// CacheDir keeps per-host facts that are slow to learn (whether the
	// hardware accelerator really runs a guest); empty: probe every start.
	CacheDir string
	Logger   *slog.Logger

	// pausedBIOS: see HostEnv.pausedBIOS.
	pausedBIOS bool
	// accelDevice replaces the host's accelerator device check in tests.
	accelDevice func() (string, error)
}

// Driver runs VMs with QEMU.
type Driver struct {
	opts Options
	log  *slog.Logger
}

// prepared is what Prepare found for a spec, kept in its plan so that
// Start and Resume do not detect the host (qemu --version, firmware,
// virtiofsd) and check the files a second time.
type prepared struct {
	env HostEnv
	bin string
}

var _ driver.Driver = (*Driver)(nil)

// New returns a QEMU driver.
func New(opts Options) *Driver {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Driver{opts: opts, log: log.With("driver", driver.TypeQEMU)}
}

func (d *Driver) Name() string { return driver.TypeQEMU }

// QMPStartTimeout bounds how long Start waits for QEMU to answer QMP.
const QMPStartTimeout = 10 * time.Second

// binary finds qemu-system-* for arch.
func (d *Driver) binary(arch string) (string, error) {
	if d.opts.Binary != "" {
		return d.opts.Binary, nil
	}
	name, err := BinaryName(arch)
	if err != nil {
		return "", err
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found in PATH: install QEMU (Debian: qemu-system-x86 or qemu-system-arm; Homebrew: qemu)", name)
	}
	return p, nil
}

// HostEnv detects the accelerator, QEMU version, firmware and virtiofsd
// that spec needs on this host, and returns the qemu binary to run.
func (d *Driver) HostEnv(spec driver.Spec) (HostEnv, string, error) {
	arch, err := qemuArch(spec.Arch)
	if err != nil {
		return HostEnv{}, "", err
	}
	bin, err := d.binary(spec.Arch)
	if err != nil {
		return HostEnv{}, "", err
	}
	choice, err := d.guessAccel(spec)
	if err != nil {
		return HostEnv{}, "", err
	}
	env := HostEnv{Accel: choice.Accel, pausedBIOS: d.opts.pausedBIOS}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return HostEnv{}, "", fmt.Errorf("run %s --version: %w", bin, err)
	}
	if env.Version, err = ParseVersion(string(out)); err != nil {
		return HostEnv{}, "", err
	}
	if spec.Kernel == "" && !env.pausedBIOS {
		if env.Firmware, err = findFirmware(arch, shareDirsFor(bin), fileExists); err != nil {
			return HostEnv{}, "", err
		}
	}
	if hasVirtiofs(spec.Shares) {
		if env.Virtiofsd, err = d.virtiofsd(); err != nil {
			return HostEnv{}, "", fmt.Errorf("virtiofsd: %w", err)
		}
	}
	return env, bin, nil
}

// virtiofsd is the daemon for virtiofs shares: the one Options names, else
// the host's, which is probed once per process.
func (d *Driver) virtiofsd() (Virtiofsd, error) {
	if d.opts.Virtiofsd != "" {
		return DetectVirtiofsd(d.opts.Virtiofsd)
	}
	c := Capabilities()
	return c.Virtiofsd, c.virtiofsdErr
}

// hasVirtiofs reports whether any share needs a virtiofsd.
func hasVirtiofs(shares []mounts.Share) bool {
	for _, s := range shares {
		if s.Type == mounts.TypeVirtiofs {
			return true
		}
	}
	return false
}

// Prepare checks spec against this host without starting anything and
// returns the plan Start and Resume boot.
func (d *Driver) Prepare(spec driver.Spec) (driver.Plan, error) {
	spec.Dir = filepath.Clean(spec.Dir)
	env, bin, err := d.prepare(spec)
	if err != nil {
		return driver.Plan{}, err
	}
	return driver.NewPlan(spec, prepared{env: env, bin: bin}), nil
}

// fromPlan is the spec and what Prepare found for it, from a plan this
// driver's Prepare made.
func fromPlan(plan driver.Plan) (driver.Spec, HostEnv, string, error) {
	p, ok := plan.Found().(prepared)
	if !ok {
		return driver.Spec{}, HostEnv{}, "", fmt.Errorf("the plan for instance %q was not made by the qemu driver's Prepare", plan.Spec().Name)
	}
	return plan.Spec(), p.env, p.bin, nil
}

func (d *Driver) prepare(spec driver.Spec) (HostEnv, string, error) {
	if spec.Dir == "" || !filepath.IsAbs(spec.Dir) {
		return HostEnv{}, "", fmt.Errorf("instance folder %q: must be an absolute path", spec.Dir)
	}
	env, bin, err := d.HostEnv(spec)
	if err != nil {
		return HostEnv{}, "", err
	}
	if _, err := Args(spec, env); err != nil {
		return HostEnv{}, "", err
	}
	for _, f := range []struct{ what, path string }{{"kernel", spec.Kernel}, {"initrd", spec.Initrd}} {
		if f.path != "" && !fileExists(f.path) {
			return HostEnv{}, "", fmt.Errorf("%s %s: not a readable file", f.what, f.path)
		}
	}
	for _, disk := range spec.Disks {
		if !fileExists(disk.Path) {
			return HostEnv{}, "", fmt.Errorf("disk %s: not a readable file", disk.Path)
		}
	}
	for _, s := range spec.Shares {
		st, err := os.Stat(s.HostPath)
		if err != nil || !st.IsDir() {
			return HostEnv{}, "", fmt.Errorf("share %s: not a folder", s.HostPath)
		}
	}
	socks := []string{QMPSocketPath(spec.Dir), AgentSocketPath(spec.Dir)}
	if env.Virtiofsd.Path != "" {
		socks = append(socks, virtiofsSocketPath(spec.Dir, len(spec.Shares)-1))
	}
	if err := sockpath.Check(sockpath.Max, socks...); err != nil {
		return HostEnv{}, "", err
	}
	return env, bin, nil
}

// Start boots plan's spec and returns once QEMU answers QMP; the guest is
// still booting then. The returned Machine is a *Machine.
func (d *Driver) Start(ctx context.Context, plan driver.Plan) (driver.Machine, error) {
	spec, env, bin, err := fromPlan(plan)
	if err != nil {
		return nil, err
	}
	choice, err := d.chooseAccel(ctx, spec, bin, env)
	if err != nil {
		return nil, err
	}
	env.Accel = choice.Accel
	if choice.Reason != "" {
		d.log.Warn("hardware acceleration not used", "accel", choice.Accel, "reason", choice.Reason)
	}
	if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create instance folder: %w", err)
	}
	if err := CleanupOrphans(spec.Dir); err != nil {
		return nil, fmt.Errorf("clean up after the previous run: %w", err)
	}
	if env.Firmware.Code != "" {
		if err := prepareEFIVars(spec.Dir, env.Firmware); err != nil {
			return nil, err
		}
	}
	m, err := d.launch(ctx, spec, env, bin, choice, nil)
	if errors.Is(err, errExitedDuringStart) && choice.Accel != AccelTCG && (spec.Accel == "" || spec.Accel == driver.AccelAuto) {
		// The probe passed but the real boot died under the accelerator:
		// trust what QEMU did, remember it, and boot emulated.
		reason := fmt.Sprintf("%s unusable: %v", choice.Accel, err)
		d.forgetAccel(bin, env.Version, spec.Arch, choice.Accel, probeBoot{Kernel: spec.Kernel, Firmware: env.Firmware.Code}, err)
		d.log.Warn("hardware acceleration failed at boot; retrying with tcg", "err", err)
		choice = accelChoice{Accel: AccelTCG, Reason: reason}
		env.Accel = AccelTCG
		m, err = d.launch(ctx, spec, env, bin, choice, nil)
	}
	return m, err
}

// withNetFile puts spec's network stack socket at netFD among the files
// qemu gets from descriptor 3 on.
func withNetFile(files []*os.File, spec driver.Spec) ([]*os.File, error) {
	if spec.NetStack != driver.NetStackGvisor {
		return files, nil
	}
	if spec.NetFile == nil {
		return nil, errors.New("network stack gvisor: the host agent gave qemu no socket to its stack")
	}
	out := make([]*os.File, netFD-2) // a nil entry is a closed descriptor
	copy(out, files)
	out[netFD-3] = spec.NetFile
	return out, nil
}

// launch starts virtiofsd and qemu for spec and waits for QMP. files are
// passed to qemu from descriptor 3 on.
func (d *Driver) launch(ctx context.Context, spec driver.Spec, env HostEnv, bin string, choice accelChoice, files []*os.File) (*Machine, error) {
	args, err := Args(spec, env)
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(LogPath(spec.Dir), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open qemu log: %w", err)
	}
	fmt.Fprintf(logFile, "=== %s vmdock starting %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))

	hw, err := hardwareDigest(spec, env)
	if err != nil {
		return nil, err
	}
	m := &Machine{
		spec:     spec,
		accel:    choice,
		version:  env.Version.String(),
		hardware: hw,
		log:      d.log.With("instance", spec.Name),
		done:     make(chan struct{}),
		qemuGone: make(chan struct{}),
		tail:     newTail(8 << 10),
		logF:     logFile,
	}
	if choice.Accel != AccelTCG {
		m.accelFailed = func(cause error) {
			d.forgetAccel(bin, env.Version, spec.Arch, choice.Accel, probeBoot{Kernel: spec.Kernel, Firmware: env.Firmware.Code}, cause)
		}
	}
	ok := false
	defer func() {
		// Once qemu runs, supervise cleans up after it; before that, the
		// daemons started so far are ours to end.
		if !ok && m.cmd == nil {
			for _, dm := range m.daemons {
				dm.stop()
			}
			logFile.Close()
		}
	}()

	if env.Virtiofsd.Path != "" {
		if err := m.startVirtiofsd(ctx, env.Virtiofsd, logFile); err != nil {
			return nil, err
		}
	}

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = io.MultiWriter(logFile, m.tail)
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = 2 * time.Second
	cmd.ExtraFiles, err = withNetFile(files, spec)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	m.cmd = cmd
	go m.supervise()
	d.log.Info("qemu started", "pid", cmd.Process.Pid, "accel", env.Accel, "version", env.Version.String())

	q, err := m.connectQMP(ctx)
	if err != nil {
		m.kill()
		<-m.done
		return nil, err
	}
	m.mu.Lock()
	m.qmp = q
	m.mu.Unlock()
	go m.watchRunState()
	m.watchDaemons()
	ok = true
	return m, nil
}

// errExitedDuringStart marks a qemu that died before it answered QMP.
var errExitedDuringStart = errors.New("qemu exited during start")

// connectQMP retries until QEMU listens, fails fast if it exits, and gives
// up after QMPStartTimeout (TCG start-up under load can take seconds).
func (m *Machine) connectQMP(ctx context.Context) (*qmp, error) {
	ctx, cancel := context.WithTimeout(ctx, QMPStartTimeout)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-m.done:
			return nil, fmt.Errorf("%w (%v): %s", errExitedDuringStart, m.waitErr, m.lastWords())
		default:
		}
		q, err := dialQMP(ctx, QMPSocketPath(m.spec.Dir))
		if err == nil {
			return q, nil
		}
		lastErr = err
		select {
		case <-m.done:
			return nil, fmt.Errorf("%w (%v): %s", errExitedDuringStart, m.waitErr, m.lastWords())
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("qemu did not answer QMP on %s within %s: %w", QMPSocketPath(m.spec.Dir), QMPStartTimeout, lastErr)
			}
			return nil, fmt.Errorf("start qemu: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exitError describes an unexpected qemu exit with its last stderr lines.
func (m *Machine) exitError(what string) error {
	return fmt.Errorf("%s (%v): %s", what, m.waitErr, m.lastWords())
}

// lastWords is QEMU's own complaint from its stderr, or where to look.
func (m *Machine) lastWords() string {
	if msg := complaint(m.tail.lines(40)); msg != "" {
		return msg
	}
	return "no output; see " + LogPath(m.spec.Dir)
}
