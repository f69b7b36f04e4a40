package vz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

// vmState mirrors vz.VirtualMachineState, so that the lifecycle below is
// plain Go that runs (and is tested) on any OS.
type vmState int

const (
	stateStopped vmState = iota
	stateRunning
	statePaused
	stateError
	stateStarting
	statePausing
	stateResuming
	stateStopping
	stateSaving
	stateRestoring
)

var stateNames = [...]string{"stopped", "running", "paused", "error", "starting", "pausing", "resuming", "stopping", "saving", "restoring"}

func (s vmState) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// vzVM is the part of *vz.VirtualMachine the machine uses. driver_darwin.go
// adapts the real one; machine_test.go scripts a fake that behaves like it.
// The calls block until Virtualization.framework's completion handler ran,
// as vz's do.
type vzVM interface {
	Start() error
	Pause() error
	Resume() error
	CanRequestStop() bool
	RequestStop() (bool, error)
	CanStop() bool
	Stop() error
	State() vmState
	// StateChanged delivers every state change once, in order.
	StateChanged() <-chan vmState
	// ConnectVsock connects to a port the guest listens on; errNoVsock
	// when the VM has no vsock device.
	ConnectVsock(port uint32) (net.Conn, error)
	// CheckSavable says why Virtualization.framework cannot save this
	// VM's configuration, or nil.
	CheckSavable() error
	// SaveState writes the paused VM's state to path; RestoreState loads
	// one into a stopped VM and leaves it paused.
	SaveState(path string) error
	RestoreState(path string) error
}

var errNoVsock = errors.New("the VM has no vsock device")

// Lifecycle bounds. They are machine fields so the tests run in
// milliseconds.
const (
	// forceStopWait bounds the wait for the stopped state after a forced
	// Stop: a machine stuck in a transition must not hang vmdock.
	forceStopWait = 10 * time.Second
	// A guest agent that is not listening yet makes a vsock connect fail
	// at once; DialAgent retries it this often within dialWindow, then
	// returns so the host agent's own retry loop can check the boot.
	dialRetry  = 200 * time.Millisecond
	dialWindow = 3 * time.Second
	// connectTimeout bounds one vsock connect: Apple documents that a
	// connect to a port nobody listens on may never complete.
	connectTimeout = 2 * time.Second
)

// machineConfig is what a machine needs besides its VM.
type machineConfig struct {
	Name        string
	VsockPort   uint32
	StopTimeout time.Duration // between RequestStop and a forced Stop
	// HostVersion is the macOS release: MachineInfo.Version, and the
	// Hypervisor of a saved state (it loads only on the same release).
	HostVersion string
	// NAT: the VM has its virtio-net device behind the framework's NAT,
	// whose guest addresses the Mac routes to.
	NAT bool
}

func machineConfigFor(spec driver.Spec, plan *VMPlan, version string) machineConfig {
	return machineConfig{Name: spec.Name, VsockPort: plan.VsockPort, StopTimeout: plan.StopTimeout, HostVersion: version, NAT: plan.NAT}
}

// machine is one vz VM. A single goroutine follows the state changes and
// closes done once the VM has stopped or failed.
type machine struct {
	cfg machineConfig
	vm  vzVM

	forceStopWait  time.Duration
	dialRetry      time.Duration
	dialWindow     time.Duration
	connectTimeout time.Duration

	done     chan struct{}
	quit     chan struct{} // ends watch for a machine given up before it ran
	quitOnce sync.Once

	mu      sync.Mutex
	state   vmState
	since   time.Time // when state was entered
	exitErr error
}

var (
	_ driver.Machine      = (*machine)(nil)
	_ driver.RoutedGuest  = (*machine)(nil)
	_ driver.CostReporter = (*machine)(nil)
)

// GuestRoutable: the NAT network's guest address is reachable from the Mac
// (Lima's vzNAT path measured about 10x its agent forwarding); an isolated
// VM has no network device, and its ports stay on the agent tunnel.
func (m *machine) GuestRoutable() bool { return m.cfg.NAT }

func newMachine(vm vzVM, cfg machineConfig) *machine {
	m := &machine{
		cfg: cfg, vm: vm,
		forceStopWait: forceStopWait, dialRetry: dialRetry, dialWindow: dialWindow, connectTimeout: connectTimeout,
		done: make(chan struct{}), quit: make(chan struct{}),
		state: stateStopped, since: time.Now(),
	}
	go m.watch()
	return m
}

// bootMachine starts vm and returns once it runs.
func bootMachine(vm vzVM, cfg machineConfig) (*machine, error) {
	m := newMachine(vm, cfg)
	if err := vm.Start(); err != nil {
		m.giveUp()
		return nil, explainMissingEntitlement(fmt.Errorf("vz: start machine %s: %w", cfg.Name, err))
	}
	return m, nil
}

// giveUp leaves nothing running of a machine that is not handed to the
// caller, and ends its watch.
func (m *machine) giveUp() {
	if s := m.vm.State(); s != stateStopped && s != stateError {
		if err := m.forceStop(); err != nil {
			slog.Warn("vz: could not stop a machine given up", "name", m.cfg.Name, "err", err)
		}
	}
	m.quitOnce.Do(func() { close(m.quit) })
}

func (m *machine) watch() {
	states := m.vm.StateChanged()
	for {
		select {
		case <-m.quit:
			return
		case s := <-states:
			m.mu.Lock()
			prev, ranFor := m.state, time.Since(m.since)
			m.state, m.since = s, time.Now()
			m.mu.Unlock()
			slog.Debug("vz state changed", "name", m.cfg.Name, "from", prev, "to", s)
			switch s {
			case stateStopped:
				// Asked for, or the guest powered itself off: either
				// way a clean end, not a failure.
				m.finish(nil)
				return
			case stateError:
				// vz gives no reason with the state; what it was doing
				// and for how long is what we can add.
				m.finish(fmt.Errorf("vz: Virtualization.framework put machine %s into its error state after %s %s (a hypervisor failure; the serial log may say more)",
					m.cfg.Name, prev, ranFor.Round(time.Second)))
				return
			}
		}
	}
}

func (m *machine) finish(err error) {
	m.mu.Lock()
	m.exitErr = err
	m.mu.Unlock()
	close(m.done)
}

func (m *machine) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// currentState is the last state vz reported.
func (m *machine) currentState() vmState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// Wait returns nil when the VM stopped (asked to, or the guest powered
// off) and an error saying so when vz failed it: the host agent marks the
// instance Broken with that error.
func (m *machine) Wait() error {
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exitErr
}

func (m *machine) Info() driver.MachineInfo {
	return driver.MachineInfo{Driver: DriverName, Accel: "vz", PID: os.Getpid(), Version: m.cfg.HostVersion}
}

// errNoCost: the guest's memory and vCPUs live in the
// com.apple.Virtualization.VirtualMachine process launchd starts for the
// VM, not in vmdock, so vmdock's own figures would say nothing about them.
var errNoCost = errors.New("vz: the VM runs in Apple's XPC service")

func (m *machine) CPUTime() (time.Duration, error)   { return 0, errNoCost }
func (m *machine) Memory() (driver.MemoryUse, error) { return driver.MemoryUse{}, errNoCost }

// DialAgent connects to the guest agent's vsock port, retrying briefly
// while the guest does not listen yet.
func (m *machine) DialAgent(ctx context.Context) (net.Conn, error) {
	deadline := time.Now().Add(m.dialWindow)
	for {
		if m.exited() {
			return nil, errors.New("vz: dial agent: the VM is not running")
		}
		c, err := m.connectOnce(ctx)
		if err == nil {
			return c, nil
		}
		if errors.Is(err, errNoVsock) || ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("vz: connect vsock port %d: %w", m.cfg.VsockPort, err)
		}
		select {
		case <-time.After(m.dialRetry):
		case <-ctx.Done():
		case <-m.done:
		}
	}
}

// connectOnce runs one vsock connect, bounded by ctx and connectTimeout;
// a connection that arrives after the caller gave up is closed.
func (m *machine) connectOnce(ctx context.Context) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := m.vm.ConnectVsock(m.cfg.VsockPort)
		ch <- result{c, err}
	}()
	t := time.NewTimer(m.connectTimeout)
	defer t.Stop()
	var err error
	select {
	case r := <-ch:
		return r.conn, r.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("no answer within %s", m.connectTimeout)
	}
	go func() {
		if r := <-ch; r.conn != nil {
			r.conn.Close()
		}
	}()
	return nil, err
}

// Stop asks the guest to power off and waits up to StopTimeout (or ctx)
// before forcing; force skips the request.
func (m *machine) Stop(ctx context.Context, force bool) error {
	if m.exited() {
		return nil
	}
	if !force && m.vm.CanRequestStop() {
		if ok, err := m.vm.RequestStop(); err != nil || !ok {
			slog.Warn("vz request stop failed, forcing", "name", m.cfg.Name, "err", err)
		} else {
			t := time.NewTimer(m.cfg.StopTimeout)
			defer t.Stop()
			select {
			case <-m.done:
				return nil
			case <-t.C:
				slog.Warn("guest did not power off in time, forcing", "name", m.cfg.Name, "timeout", m.cfg.StopTimeout)
			case <-ctx.Done():
				slog.Warn("stop cancelled, forcing", "name", m.cfg.Name, "err", ctx.Err())
			}
		}
	}
	return m.forceStop()
}

// forceStop pulls the plug and waits for the stopped state.
func (m *machine) forceStop() error {
	if m.vm.CanStop() {
		if err := m.vm.Stop(); err != nil && !m.exited() {
			return fmt.Errorf("vz: force stop %s: %w", m.cfg.Name, err)
		}
	}
	// The state change arrives after Stop returns.
	select {
	case <-m.done:
		return nil
	case <-time.After(m.forceStopWait):
		return fmt.Errorf("vz: machine %s still %s %s after a forced stop", m.cfg.Name, m.vm.State(), m.forceStopWait)
	}
}
