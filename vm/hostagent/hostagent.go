// Package hostagent is the one background process per instance that owns the
// VM, the agent session, every tunnel and the control socket. `vmdock start`
// spawns it detached (hidden command `vmdock hostagent`) and follows its
// events until Docker answers.
package hostagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/internal/memtrim"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/network/domains/sharedrouter"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/filesync"
	"github.com/vmdock/vmdock/vm/idle"
	"github.com/vmdock/vmdock/vm/logfile"
	"github.com/vmdock/vmdock/vm/resume"
	"github.com/vmdock/vmdock/vm/store"
)

// Options tune a host agent run; the zero value is what `vmdock hostagent`
// uses.
type Options struct {
	// AgentTimeout bounds how long the guest agent may take to answer after
	// the VM started. TCG boots take a minute on a busy 2-core host.
	AgentTimeout time.Duration
	// StopTimeout bounds the graceful power-off before the VM is killed.
	StopTimeout time.Duration
	// BootSilence is how long a booting guest may print nothing on its
	// serial console before the boot counts as hung.
	BootSilence time.Duration
	// AgentAnswer bounds the guest agent's reply to the power-off request;
	// an agent that cannot answer in this time is gone.
	AgentAnswer time.Duration
	// ACPITimeout bounds the wait for the guest to obey the ACPI power
	// button (the fall back when the agent is gone) before the VM is ended.
	ACPITimeout time.Duration
	// SettleTimeout bounds the guest agent's settle (its container
	// runtimes stopped, its disks flushed) before a VM that cannot power
	// off is ended: the guest's own budgets for the two (35 s and 15 s)
	// and a margin for the answer.
	SettleTimeout time.Duration
	// Host is this machine as the command line detected it; the instance's
	// config is read with its defaults.
	Host config.Host
	// Routes adds handlers to the control socket, keyed by their
	// http.ServeMux pattern ("POST /path"). It is called once, with machine,
	// which returns the running VM (nil while none runs). The command line
	// adds the bench's scratch-disk route here: the host agent knows no
	// added route's meaning, and the daemon does not import the bench.
	Routes func(machine func() driver.Machine) map[string]http.Handler
}

func (o *Options) setDefaults() {
	if o.AgentTimeout == 0 {
		o.AgentTimeout = 8 * time.Minute
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 90 * time.Second
	}
	if o.BootSilence == 0 {
		// A TCG boot on a loaded 2-core host has been seen quiet for
		// 20-30 s between kernel and systemd lines; far more is a hang.
		o.BootSilence = 2 * time.Minute
	}
	if o.AgentAnswer == 0 {
		o.AgentAnswer = 3 * time.Second
	}
	if o.ACPITimeout == 0 {
		// With the agent gone, stop must still end within ~15 s; a guest
		// that needs longer to shut down by the power button is killed.
		o.ACPITimeout = 8 * time.Second
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = 55 * time.Second
	}
}

// hostAgent is the state of one run, by the part that owns it. mu guards
// run and the fields marked "under mu": status reads them while the boot,
// the reconnects and the shutdown change them.
type hostAgent struct {
	inst   *store.Instance
	cfg    config.Config
	opts   Options
	events *control.EventLog
	seq    *sequence // the boot steps and their undo

	boot    bootResults
	mu      sync.Mutex
	run     runState
	session agentSession
	// guestDNSAsk is the guest's DNS upstreams as status reports them.
	guestDNSAsk guestDNSCache
	files       fileWork
	idle        idleState
	stop        stopSignal
	cpu         cpuRing         // the running VM's CPU time samples (cost.go)
	sshAgent    sshAgentForward // the host's SSH agent the guest is offered (sshagent.go)
	// sshAgentOpen counts the SSH agent streams being relayed.
	sshAgentOpen atomic.Int32
	// domains serves http(s)://<name>.vmdock.localhost (domains.go); not
	// under mu, as the port forwarder's Yield reads it while status holds
	// mu to read the forwarder.
	domains atomic.Pointer[sharedrouter.Server]
	// clocks tells the host's sleeps (wake.go); nil: not watched.
	clocks hostClocks
	// remote is a remote instance's server (remote.go); nil for a VM.
	remote *remoteRun
	// watch checks the network paths and mends them (watchdog.go).
	watch watchState
}

// bootResults are what the boot steps find out, each set by one step for
// the later ones.
type bootResults struct {
	// upgradeImage: this start remakes the root disk from the image a new
	// instance would get (`start --upgrade-image`).
	upgradeImage bool
	img          *images.Image
	// corp is the host's CA certificates and proxy as this start read them
	// (the host-settings step; under mu).
	corp corpNet
	// resumeFrom is the saved state this start resumes (nil: a cold
	// boot); resumed says the running VM came from it.
	resumeFrom *resume.Saved
	resumed    bool
	spec       driver.Spec
	driver     driver.Driver
	plan       driver.Plan // spec as the driver prepared it, for Start or Resume
	hello      agent.Info  // the guest agent's first answer
}

// runState is the instance as status shows it (under mu).
type runState struct {
	phase   string
	machine driver.Machine
	console *consoleWatch
	tunnels *tunnels
	net     *usernetRun // network.stack gvisor only
}

// agentSession is the guest agent's session and its reconnects
// (reconnect.go).
type agentSession struct {
	client *agent.Client // under mu
	// link follows client across reconnects; the tunnels dial through it.
	link             agentLink
	stopReconnecting func() // under mu
	// count is the agent sessions of this run: a reconnect (or a pause
	// that lost its session) adds one (under mu).
	count int
}

// fileWork is the file sync of the run: syncs runs the sync mounts (the
// "sync" step); shares relays host edits in shares to the guest (started
// by the "mounts" step).
type fileWork struct {
	syncs  *filesync.SyncMounts
	shares *filesync.ShareRelay
}

// idleState is the idle pause (idle.go): monitor pauses the VM while
// unused, and every use holds it.
type idleState struct {
	monitor *idle.Monitor
	// off says why the VM never pauses (under mu); syncsHalted: the pause
	// halted the sync mounts, the wake resumes them (under mu).
	off         string
	syncsHalted bool
	// syncsBack is closed once the sync mounts a wake resumes run again;
	// sync requests wait for it (nil: nothing to wait for; under mu).
	syncsBack chan struct{}
}

// stopSignal carries the one stop request of a run to Run.
type stopSignal struct {
	once sync.Once
	ch   chan control.StopRequest
}

// Run boots the instance and serves it until stopped. It returns nil after
// a requested stop, an error when booting failed or the VM died.
func Run(ctx context.Context, inst *store.Instance, opts Options) error {
	opts.setDefaults()
	cfg, err := inst.LoadConfig(opts.Host)
	if err != nil {
		return err
	}
	ha := newHostAgent(inst, cfg, opts)
	ha.startSSHAgent()
	if err := writePID(inst.PIDPath()); err != nil {
		return err
	}
	defer os.Remove(inst.PIDPath())
	tuneProcess(ctx, inst)
	closeControl, err := ha.openControl()
	if err != nil {
		return err
	}
	defer closeControl()

	ctx, cancel := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if cfg.IsRemote() {
		if err := ha.bootVM(ctx, ha.remoteSteps()); err != nil {
			return err
		}
		return ha.serveRemote(ctx)
	}
	if err := ha.bootVM(ctx, ha.bootSteps()); err != nil {
		return err
	}
	vmExited := ha.goLive(ctx)
	return ha.serveUntilEnd(ctx, vmExited)
}

// newHostAgent is the state of a run before the boot: the boot steps'
// sequence, the idle monitor and the file sync parts.
func newHostAgent(inst *store.Instance, cfg config.Config, opts Options) *hostAgent {
	ha := &hostAgent{inst: inst, cfg: cfg, opts: opts, events: control.NewEventLog(), run: runState{phase: control.PhaseStarting}, stop: stopSignal{ch: make(chan control.StopRequest, 1)}, clocks: defaultClocks, watch: watchState{dog: newWatchdog()}}
	ha.seq = &sequence{events: ha.events}
	ha.idle.monitor = ha.newIdleMonitor()
	ha.files.syncs = filesync.NewSyncMounts(filesync.SyncConfig{
		DataDir: inst.SyncDataPath(), Syncs: cfg.SyncMounts(), Live: ha.session.link.live, Events: ha.events,
		Server: cfg.IsRemote(),
	})
	ha.files.shares = filesync.NewShareRelay(filesync.ShareConfig{
		Shares: mounts.Shares(cfg.Mounts, cfg.MountType), InstanceDir: inst.Dir,
		Current: func() *agent.Client { c, _ := ha.session.link.state(); return c },
		Paused:  ha.idle.monitor.Paused,
	})
	return ha
}

// tuneProcess readies this process for a long run: file limit, no huge
// pages, logs under their cap, and the last run's breakage forgotten.
func tuneProcess(ctx context.Context, inst *store.Instance) {
	raiseFileLimit()
	if err := memtrim.NoHugePages(); err != nil {
		slog.Debug("transparent huge pages stay on", "err", err)
	}
	capLogs(ctx, inst)
	os.Remove(inst.BrokenPath())
}

// openControl serves the control socket with its routes and the ones
// Options.Routes adds; the returned func closes it.
func (ha *hostAgent) openControl() (func(), error) {
	ctrl, err := control.Listen(ha.inst.ControlSocketPath(), control.Handlers{
		Status: ha.status, Events: ha.events, Stop: ha.requestStop, OpenStream: ha.openAgentStream,
		SyncFlush: ha.heldSyncAction(ha.files.syncs.Flush), SyncReset: ha.heldSyncAction(ha.files.syncs.Reset),
		SyncPause: ha.heldSyncAction(ha.files.syncs.Pause), SyncResume: ha.heldSyncAction(ha.files.syncs.Resume),
		SetIdle: ha.setIdle,
	})
	if err != nil {
		return nil, err
	}
	if ha.opts.Routes != nil {
		for pattern, h := range ha.opts.Routes(ha.currentMachine) {
			ctrl.Handle(pattern, ha.heldHandler(h))
		}
	}
	return func() {
		// Give followers a moment to read the final event before the socket goes.
		time.Sleep(300 * time.Millisecond)
		ctrl.Close()
		os.Remove(ha.inst.ControlSocketPath())
	}, nil
}

// bootVM runs the boot steps; a stop request meanwhile aborts them. A
// failed boot is undone and reported before its error comes back.
func (ha *hostAgent) bootVM(ctx context.Context, steps []step) error {
	bootCtx, bootCancel := context.WithCancel(ctx)
	go func() {
		// A stop request during boot aborts the boot.
		select {
		case <-ha.stop.ch:
			ha.stop.ch <- forced
			bootCancel()
		case <-bootCtx.Done():
		}
	}()
	runErr := ha.seq.run(bootCtx, steps)
	bootCancel()
	if runErr == nil {
		return nil
	}
	slog.Error("boot failed", "err", runErr)
	if !errors.Is(runErr, context.Canceled) { // a stop during boot is no breakage
		markBroken(ha.inst, runErr.Error())
	}
	ha.setPhase(control.PhaseStopping)
	ha.shutdown(forced)
	ha.events.Emit("boot", control.EventFailed, runErr.Error(), "")
	if errors.Is(runErr, context.Canceled) {
		ha.events.Emit("stop", control.EventStopped, "", control.StopDuringBoot)
	}
	return runErr
}

// goLive tells the CLI the instance is ready and starts what runs beside
// a ready VM. The channel gets the VM's end.
func (ha *hostAgent) goLive(ctx context.Context) <-chan error {
	ha.setPhase(control.PhaseRunning)
	ha.startReconnect(ctx)
	ha.events.Emit("ready", control.EventReady, "", "")
	slog.Info("instance ready", "timing", ha.events.StepTimes())
	go ha.askGuestDNS() // status has the guest's resolvers from the start

	vmExited := make(chan error, 1)
	go func() { vmExited <- ha.run.machine.Wait() }()
	go ha.keepClockInSync(ctx)
	go ha.runWakeWatch(ctx)
	go ha.runWatchdog(ctx)
	go ha.sampleCPU(ctx)
	go ha.runIdle(ctx)
	// The boot's work (share walks, image checks, the first sync) leaves
	// heap and touched code behind that an idle agent does not need.
	go memtrim.WhenQuiet(ctx, memtrim.QuietOptions{Period: 10 * time.Second})
	return vmExited
}

// serveUntilEnd waits for a stop request, a signal, a failed console or
// the VM's end, and shuts the instance down accordingly.
func (ha *hostAgent) serveUntilEnd(ctx context.Context, vmExited <-chan error) error {
	select {
	case req := <-ha.stop.ch:
		ha.setPhase(control.PhaseStopping)
		ha.events.Emit("stop", control.EventStopped, "", ha.shutdown(req))
		return nil
	case <-ctx.Done():
		ha.setPhase(control.PhaseStopping)
		ha.events.Emit("stop", control.EventStopped, "", ha.shutdown(control.StopRequest{}))
		return nil
	case err := <-ha.run.console.Failed():
		return ha.failVM(err.Error(), err)
	case err := <-vmExited:
		return ha.vmEnded(err)
	}
}

// vmEnded handles a VM that exited without being asked to.
func (ha *hostAgent) vmEnded(err error) error {
	reason := "the VM exited unexpectedly"
	if perr := ha.run.console.panicked(); perr != nil {
		err = perr
	}
	if err == nil {
		// A clean exit nobody asked for is the guest's own power-off
		// (QEMU runs with -no-reboot, so a guest reboot ends the same
		// way): the instance is Stopped, and no `vmdock stop` will run
		// to put the docker context back.
		slog.Info("the guest powered itself off; stopping the instance")
		ha.setPhase(control.PhaseStopping)
		ha.shutdown(forced)
		ha.inst.DockerContext().Restore()
		ha.events.Emit("stop", control.EventStopped, "", control.StopBySelf)
		return nil
	}
	reason += ": " + err.Error()
	return ha.failVM(reason, errors.New(reason))
}

// failVM marks the instance broken for reason, shuts it down and tells
// the followers; err comes back.
func (ha *hostAgent) failVM(reason string, err error) error {
	slog.Error(reason)
	markBroken(ha.inst, reason)
	ha.shutdown(forced)
	ha.events.Emit("vm", control.EventFailed, reason, "")
	return err
}

// currentMachine is the running VM, for the routes Options.Routes adds;
// nil while none runs.
func (ha *hostAgent) currentMachine() driver.Machine {
	ha.mu.Lock()
	defer ha.mu.Unlock()
	return ha.run.machine
}

// forced is the stop of a failed boot or a dead VM: nothing to save.
var forced = control.StopRequest{Force: true}

func (ha *hostAgent) requestStop(req control.StopRequest) {
	ha.stop.once.Do(func() { ha.stop.ch <- req })
}

func (ha *hostAgent) setPhase(p string) {
	ha.mu.Lock()
	ha.run.phase = p
	ha.mu.Unlock()
}

func (ha *hostAgent) status() control.Status {
	syncs := ha.files.syncs.Status()
	idleStatus := ha.idleStatus()
	var guestDNS *control.GuestDNSStatus
	if !idleStatus.Paused && ha.remote == nil { // a server resolves for itself
		guestDNS = ha.guestDNS()
	}
	shares, shareProblems := ha.files.shares.Status()
	var cost *control.HostCost
	if m := ha.currentMachine(); m != nil {
		cost = ha.hostCost(m) // reads files: not under mu
	}
	ha.mu.Lock()
	defer ha.mu.Unlock()
	st := control.Status{
		Syncs:         syncs,
		PID:           os.Getpid(),
		Phase:         ha.run.phase,
		Step:          ha.events.CurrentStep(),
		Runtime:       ha.cfg.Runtime,
		RuntimeSocket: runtimeFor(ha.cfg.Runtime).hostSocket(ha.inst),
		Ports:         []control.ForwardedPort{},
	}
	if ha.run.phase == control.PhaseRunning || ha.run.phase == control.PhaseReconnecting {
		st.Step = "" // the boot steps are history once the instance is up
		st.Boot = &control.BootReport{Steps: ha.events.StepTimes(), GuestUptime: ha.boot.hello.Uptime, GuestKernel: ha.boot.hello.Kernel}
	}
	if ha.run.machine != nil {
		st.Machine = ha.run.machine.Info()
		st.Network = &control.NetworkStatus{Stack: ha.boot.spec.NetStack, Mode: ha.boot.spec.Network, Relays: ha.netStackRelays()}
		st.Errors = append(st.Errors, st.Machine.Problems...)
	}
	if ha.run.tunnels != nil {
		st.Ports = notePortsTheRouterHolds(ha.run.tunnels.ports(), ha.cfg.Domains)
	}
	st.Shares = shares
	st.Errors = append(st.Errors, shareProblems...)
	st.Cost = cost
	st.Proxy, st.CACerts = ha.boot.corp.status(), len(ha.boot.corp.certs.Certs)
	st.SSHAgent = ha.sshAgent.status()
	st.Idle = idleStatus
	st.AgentSessions = ha.session.count
	st.GuestDNS = guestDNS
	st.Watchdog = ha.watch.dog.status()
	return st
}

// shutdown saves the VM for the next start or powers the guest off
// (gracefully unless req.Force), then undoes every boot step in reverse.
// It returns how the guest went down.
func (ha *hostAgent) shutdown(req control.StopRequest) string {
	ctx, cancel := context.WithTimeout(context.Background(), ha.opts.StopTimeout+30*time.Second)
	defer cancel()
	// A paused VM runs again for its stop: the save, the last sync and
	// the power-off all need the guest.
	if err := ha.idle.monitor.Close(ctx); err != nil {
		slog.Warn("wake the VM for its stop", "err", err)
	}
	ha.stopReconnect()
	ha.files.shares.Stop()
	ha.mu.Lock()
	m, c := ha.run.machine, ha.session.client
	ha.mu.Unlock()
	how := control.StopByForce
	if m != nil && c != nil && req.Force {
		ha.flushBeforeKill(ctx, c)
	}
	if m != nil && !req.Force {
		// The last flush of the sync mounts first asks the guest agent.
		if c != nil && ha.files.syncs.FlushBeforeStop(ctx, c, ha.opts.AgentAnswer, ha.stopNote) {
			c = nil // it did not answer: straight to the power button
		}
		if c != nil && !req.NoSave && ha.saveVM(ctx, m, c) {
			how = control.StopBySave
		} else {
			how = ha.powerOff(ctx, m, c)
		}
	}
	for _, err := range ha.seq.unwind(ctx) {
		slog.Warn("shutdown", "err", err)
	}
	return how
}

// flushBeforeKill asks a connected guest agent to put what the guest
// wrote on its disks before a forced stop ends the VM: without it a file
// written seconds before (a sandbox's unreviewed edit, a build's output)
// dies in the guest's page cache. A guest that does not answer in time
// is ended all the same: a forced stop is for a guest that will not
// stop, so it waits no longer than for any answer (AgentAnswer).
func (ha *hostAgent) flushBeforeKill(ctx context.Context, c *agent.Client) {
	began := time.Now()
	if err := askBounded(ctx, ha.opts.AgentAnswer, c.FlushDisks); err != nil {
		ha.stopNote(fmt.Sprintf("the guest did not flush its disks before the forced stop (%v); what it wrote last may be lost", err))
		return
	}
	slog.Info("the guest flushed its disks before the forced stop", "took", time.Since(began).Round(time.Millisecond))
}

// powerOff asks the guest agent first (it knows how to stop dockerd
// cleanly). An agent that is not connected or does not answer at once is
// gone, so the ACPI power button comes next, briefly; what is still
// running after that is killed (by Stop itself, or the machine step's
// undo). It returns the path that took the guest down.
func (ha *hostAgent) powerOff(ctx context.Context, m driver.Machine, c *agent.Client) string {
	if dead := m.Info().DeadShares; c != nil && len(dead) > 0 {
		return ha.settleAndEnd(ctx, m, c, dead)
	}
	exited := make(chan struct{})
	go func() { m.Wait(); close(exited) }()
	why := "the guest agent is not connected"
	if c != nil {
		err := askBounded(ctx, ha.opts.AgentAnswer, c.PowerOff)
		if err == nil {
			select {
			case <-exited:
				return control.StopByAgent
			case <-time.After(ha.opts.StopTimeout):
				ha.stopNote(fmt.Sprintf("the guest did not power off within %s of the guest agent's power-off; ending the VM", ha.opts.StopTimeout))
				return control.StopByForce
			}
		}
		why = fmt.Sprintf("the guest agent did not take the power-off (%v)", err)
	}
	ha.stopNote(why + "; pressing the ACPI power button")
	actx, acancel := context.WithTimeout(ctx, ha.opts.ACPITimeout)
	defer acancel()
	stopped := make(chan struct{})
	go func() {
		// Past actx, Stop itself quits and then kills the VM.
		if err := m.Stop(actx, false); err != nil {
			slog.Warn("ACPI power-off", "err", err)
		}
		close(stopped)
	}()
	select {
	case <-exited:
		<-stopped
		return control.StopByACPI
	case <-actx.Done():
	}
	ha.stopNote(fmt.Sprintf("the guest did not power off within %s of the ACPI power button; ending the VM", ha.opts.ACPITimeout))
	<-stopped
	return control.StopByForce
}

// settleAndEnd ends a VM that could not power off: a virtiofs share whose
// daemon died cannot be unmounted in the guest (its kernel waits for the
// daemon's answer), so systemd's power-off would hang there until the stop
// timeout. The guest agent stops the container runtimes and flushes the
// disks instead, and then the VM is ended.
func (ha *hostAgent) settleAndEnd(ctx context.Context, m driver.Machine, c *agent.Client, dead []string) string {
	ha.stopNote(fmt.Sprintf("the virtiofs share of %s lost its daemon and cannot be unmounted in the guest: "+
		"the guest stops its container runtimes and flushes its disks, then the VM is ended", strings.Join(dead, ", ")))
	how := control.StopBySettle
	if err := askBounded(ctx, ha.opts.SettleTimeout, c.Settle); err != nil {
		ha.stopNote(fmt.Sprintf("the guest agent did not settle (%v); ending the VM", err))
		how = control.StopByForce
	}
	if err := m.Stop(ctx, true); err != nil {
		slog.Warn("end the VM", "err", err)
	}
	return how
}

// askBounded bounds the guest agent's answer itself: with the agent dead
// behind a channel that stays open, opening the request's stream waits for
// yamux's write timeout (30 s) whatever ctx says.
func askBounded(ctx context.Context, timeout time.Duration, ask func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	answer := make(chan error, 1)
	go func() { answer <- ask(ctx) }()
	select {
	case err := <-answer:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %s", timeout)
	}
}

// stopNote logs a step of the shutdown and tells `vmdock stop` about it.
func (ha *hostAgent) stopNote(text string) {
	slog.Warn(text)
	ha.events.Emit("stop", control.EventNote, "", text)
}

// capLogs moves full logs aside before this run appends to them, and keeps
// the host agent's own log (its stderr) under the cap while it runs. The
// serial console log is QEMU's open file for the whole run: it is capped
// at each start only.
func capLogs(ctx context.Context, inst *store.Instance) {
	for _, p := range []string{inst.SerialLogPath(), inst.GuestAgentLogPath()} {
		if err := logfile.Rotate(p, logfile.MaxSize); err != nil {
			slog.Warn("rotate log", "err", err)
		}
	}
	logfile.StderrRotator(inst.HostAgentLogPath(), logfile.MaxSize, 30*time.Second, ctx.Done())
}

// keepClockInSync resets the guest clock when the host wall clock jumps
// (the laptop slept): the guest has no NTP, by design.
func (ha *hostAgent) keepClockInSync(ctx context.Context) {
	const every = 10 * time.Second
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			// Wall time strips the monotonic reading, so a suspend shows up
			// as wall time advancing far more than the ticker period.
			jump := now.Round(0).Sub(last.Round(0)) - now.Sub(last)
			last = now
			if jump < 2*time.Second && jump > -2*time.Second {
				continue
			}
			if ha.idle.monitor.Paused() {
				continue // the wake sets the clock; a request now would wait for it
			}
			if err := ha.setGuestClock(ctx); err != nil {
				slog.Warn("resync guest clock", "err", err)
			} else {
				slog.Info("guest clock resynced after a host clock jump", "jump", jump)
			}
		}
	}
}

func writePID(path string) error {
	if err := atomicfile.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

func markBroken(inst *store.Instance, reason string) {
	atomicfile.WriteFile(inst.BrokenPath(), []byte(reason+"\n"), 0o600)
}

// openAgentStream gives `vmdock ssh`, `exec` and `nerdctl` a raw stream
// to the guest agent; the VM is held (woken if paused) while it is open.
func (ha *hostAgent) openAgentStream(ctx context.Context) (net.Conn, error) {
	ha.mu.Lock()
	c := ha.session.client
	ha.mu.Unlock()
	if c == nil {
		return nil, errors.New("the guest agent is not connected")
	}
	release, err := ha.hold(ctx)
	if err != nil {
		return nil, err
	}
	// Across a reconnect, wait for the new session rather than fail.
	wctx, cancel := context.WithTimeout(ctx, reconnectWait)
	defer cancel()
	c, err = ha.session.link.live(wctx)
	if err != nil {
		release()
		return nil, fmt.Errorf("the guest agent is not connected (reconnecting for over %s)", reconnectWait)
	}
	conn, err := c.OpenRaw(ctx)
	if err != nil {
		release()
		return nil, err
	}
	return &heldConn{Conn: conn, release: release}, nil
}
