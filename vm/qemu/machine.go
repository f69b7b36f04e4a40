package qemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

// Machine is one running qemu process and its virtiofsd helpers.
type Machine struct {
	spec    driver.Spec
	accel   accelChoice
	version string
	// hardware is hardwareDigest of the command line it runs, recorded
	// with a saved state.
	hardware string
	log      *slog.Logger
	cmd      *exec.Cmd
	qmp      *qmp
	tail     *tailBuffer
	logF     *os.File

	daemons []*daemon

	done     chan struct{} // closed when qemu and its helpers are gone
	qemuGone chan struct{} // closed when qemu itself has been reaped
	waitErr  error         // qemu's exit, valid after done

	mu       sync.Mutex
	stopping bool  // Stop asked for the exit, so Wait reports none
	failure  error // why the run-state watch ended the VM
	// accelFailed records that the hardware accelerator failed this guest
	// (nil under tcg), so the next start emulates instead of failing again.
	accelFailed func(cause error)
	problems    []string
	deadShares  []string
	hostfwds    map[int]int // guest port -> host loopback port (OpenPort)
}

var _ driver.Machine = (*Machine)(nil)

// daemon is one virtiofsd process.
type daemon struct {
	share   string // host folder it serves
	cmd     *exec.Cmd
	sock    string
	pidFile string
	tail    *tailBuffer
	done    chan struct{}
}

// cpuNote says when the guest runs with fewer vCPUs than cpus.
func cpuNote(cpus int, accel string) string {
	if n := GuestCPUs(cpus, accel); n != cpus {
		return fmt.Sprintf("%d vCPU of the %d asked: under TCG one host thread runs every vCPU, so more would only slow the guest", n, cpus)
	}
	return ""
}

// quitGrace is how long Stop waits for QMP quit before SIGKILL, and how
// long virtiofsd gets to notice that qemu is gone.
const quitGrace = 5 * time.Second

func (m *Machine) Info() driver.MachineInfo {
	info := driver.MachineInfo{Driver: driver.TypeQEMU, Accel: m.accel.Accel, AccelReason: m.accel.Reason, Version: m.version,
		CPUNote: cpuNote(m.spec.CPUs, m.accel.Accel)}
	m.mu.Lock()
	info.Problems = append([]string(nil), m.problems...)
	info.DeadShares = append([]string(nil), m.deadShares...)
	m.mu.Unlock()
	if m.cmd != nil && m.cmd.Process != nil {
		info.PID = m.cmd.Process.Pid
	}
	return info
}

func (m *Machine) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// DialAgent connects to the virtio-serial port's unix socket. QEMU serves
// one client at a time: a second dial waits until the first closes.
func (m *Machine) DialAgent(ctx context.Context) (net.Conn, error) {
	if m.exited() {
		return nil, errors.New("dial agent: the VM is not running")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", AgentSocketPath(m.spec.Dir))
	if err != nil {
		return nil, fmt.Errorf("dial agent: %w", err)
	}
	return c, nil
}

// QueryStatus returns QEMU's run state (running, paused, shutdown, ...).
func (m *Machine) QueryStatus(ctx context.Context) (string, error) {
	if m.exited() {
		return "", errors.New("query status: the VM is not running")
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := m.qmp.execute(ctx, "query-status", nil, &st); err != nil {
		return "", err
	}
	return st.Status, nil
}

// Stop powers the VM off. Graceful: ACPI power button, wait until ctx is
// done, then QMP quit, then SIGKILL. Force: SIGKILL at once. Either way
// virtiofsd is ended and the sockets are removed before Stop returns.
func (m *Machine) Stop(ctx context.Context, force bool) error {
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
	if m.exited() {
		return nil
	}
	if force {
		m.kill()
		<-m.done
		return nil
	}
	if err := m.qmp.execute(ctx, "system_powerdown", nil, nil); err != nil && !m.exited() && ctx.Err() == nil {
		m.log.Warn("ACPI power-down failed; quitting qemu", "err", err)
	} else {
		select {
		case <-m.done:
			return nil
		case <-ctx.Done():
			m.log.Warn("guest did not power off in time; quitting qemu")
		}
	}
	m.quit("QMP quit failed; killing qemu")
	return nil
}

// quit ends qemu the way Stop and Save finish: QMP quit, and SIGKILL when
// qemu has not exited within quitGrace; it returns once qemu is gone. The
// exit is marked as asked for, so Wait reports none. failed is the warning
// logged when the quit command itself fails.
func (m *Machine) quit(failed string) {
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
	qctx, cancel := context.WithTimeout(context.Background(), quitGrace)
	defer cancel()
	if err := m.qmp.execute(qctx, "quit", nil, nil); err != nil && !isEOF(err) && !m.exited() {
		m.log.Warn(failed, "err", err)
	}
	select {
	case <-m.done:
		return
	case <-qctx.Done():
	}
	m.log.Warn("qemu ignored quit; killing it", "pid", m.cmd.Process.Pid)
	m.kill()
	<-m.done
}

// Wait blocks until qemu has exited and its helpers are cleaned up. An
// exit that Stop asked for is not an error; a crash reports qemu's last
// words.
func (m *Machine) Wait() error {
	<-m.done
	m.mu.Lock()
	stopping, failure := m.stopping, m.failure
	m.mu.Unlock()
	if failure != nil {
		return failure
	}
	if stopping || m.waitErr == nil {
		return nil
	}
	return m.exitError("qemu exited")
}

func (m *Machine) kill() {
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Kill()
	}
	m.killDaemons()
}

func (m *Machine) killDaemons() {
	for _, d := range m.daemons {
		_ = d.cmd.Process.Kill()
	}
}

// supervise reaps qemu, gives virtiofsd a moment to exit by itself (it
// does when qemu's vhost-user connection closes), then removes the
// sockets and pid files so the next start finds a clean folder.
func (m *Machine) supervise() {
	m.waitErr = m.cmd.Wait()
	close(m.qemuGone)
	deadline := time.After(quitGrace)
	for _, d := range m.daemons {
		select {
		case <-d.done:
		case <-deadline:
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
	m.mu.Lock()
	if m.qmp != nil {
		_ = m.qmp.Close()
	}
	m.mu.Unlock()
	removeSockets(m.spec.Dir)
	for _, d := range m.daemons {
		_ = os.Remove(d.pidFile)
	}
	_ = os.Remove(PIDFilePath(m.spec.Dir))
	fmt.Fprintf(m.logF, "=== %s qemu exited: %v\n", time.Now().Format(time.RFC3339), m.waitErr)
	_ = m.logF.Close()
	m.log.Info("qemu exited", "err", m.waitErr)
	close(m.done)
}

// runStatePoll is how often the run-state watch asks QEMU; well inside the
// 10 s in which a dead guest must be reported.
const runStatePoll = time.Second

// deadRunStates are QEMU run states a guest never leaves by itself.
var deadRunStates = map[string]string{
	"internal-error": "qemu stopped the guest on an internal error",
	"guest-panicked": "the guest kernel panicked",
	"io-error":       "qemu stopped the guest on a disk I/O error",
}

// watchRunState polls QEMU's run state and ends a VM that can no longer
// run: QEMU keeps such a process alive (paused), so nothing else notices.
func (m *Machine) watchRunState() {
	t := time.NewTicker(runStatePoll)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := m.QueryStatus(ctx)
		cancel()
		what, dead := deadRunStates[st]
		if err != nil || !dead {
			continue
		}
		m.mu.Lock()
		m.failure = fmt.Errorf("%s (status %s)", what, st)
		if st != "guest-panicked" { // the serial console tells a panic; QEMU's stderr the rest
			m.failure = fmt.Errorf("%w: %s", m.failure, m.lastWords())
		}
		m.mu.Unlock()
		m.log.Error("VM can no longer run; ending it", "status", st, "err", m.failure)
		if st == "internal-error" && m.accelFailed != nil {
			m.accelFailed(m.failure)
		}
		m.kill()
		return
	}
}

// watchDaemons records a virtiofsd that dies while qemu runs: QEMU keeps
// going, and the share's files fail in the guest, so status must say why.
func (m *Machine) watchDaemons() {
	for _, d := range m.daemons {
		go func(d *daemon) {
			select {
			case <-m.done:
				return
			case <-d.done:
			}
			// virtiofsd ends by itself when qemu goes: only a daemon that
			// dies while qemu lives is a fault.
			select {
			case <-m.qemuGone:
				return
			case <-time.After(time.Second):
			}
			problem := fmt.Sprintf("virtiofsd for %s exited (%s); its share fails in the guest until `vmdock restart`", d.share, d.exitState())
			m.log.Error("virtiofsd exited while the VM runs", "share", d.share, "state", d.exitState())
			m.mu.Lock()
			m.problems = append(m.problems, problem)
			m.deadShares = append(m.deadShares, d.share)
			m.mu.Unlock()
		}(d)
	}
}

// virtiofsdStartTimeout bounds the wait for a daemon's socket.
const virtiofsdStartTimeout = 5 * time.Second

// startVirtiofsd runs one daemon per share and waits for each socket,
// since qemu fails at once if a vhost-user socket is not there yet.
func (m *Machine) startVirtiofsd(ctx context.Context, v Virtiofsd, logW io.Writer) error {
	asRoot := os.Geteuid() == 0
	for i, s := range m.spec.Shares {
		if s.Type != mounts.TypeVirtiofs {
			continue
		}
		sock := virtiofsSocketPath(m.spec.Dir, i)
		d, err := startDaemon(ctx, v.Path, v.args(sock, s, asRoot), sock, virtiofsdPIDPath(m.spec.Dir, i), logW)
		if d != nil {
			d.share = s.HostPath
			m.daemons = append(m.daemons, d)
		}
		if err != nil {
			return fmt.Errorf("virtiofsd for %s: %w", s.HostPath, err)
		}
	}
	return nil
}

func startDaemon(ctx context.Context, bin string, args []string, sock, pidFile string, logW io.Writer) (*daemon, error) {
	_ = os.Remove(sock)
	d := &daemon{sock: sock, pidFile: pidFile, tail: newTail(4 << 10), done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logW
	cmd.Stderr = io.MultiWriter(logW, d.tail)
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	d.cmd = cmd
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(d.done) }()
	if err := atomicfile.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		return d, fmt.Errorf("write pid file: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, virtiofsdStartTimeout)
	defer cancel()
	for {
		if st, err := os.Stat(sock); err == nil && st.Mode()&os.ModeSocket != 0 {
			return d, nil
		}
		select {
		case <-d.done:
			return d, fmt.Errorf("exited during start (%v): %s", waitErr, d.tail.lines(5))
		case <-ctx.Done():
			return d, fmt.Errorf("socket %s did not appear within %s: %w", sock, virtiofsdStartTimeout, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exitState is how the daemon ended, e.g. "signal: killed".
func (d *daemon) exitState() string {
	if ps := d.cmd.ProcessState; ps != nil {
		return ps.String()
	}
	return "unknown"
}

// stop ends a daemon started by startDaemon and removes its files.
func (d *daemon) stop() {
	_ = d.cmd.Process.Kill()
	<-d.done
	_ = os.Remove(d.pidFile)
	_ = os.Remove(d.sock)
}
