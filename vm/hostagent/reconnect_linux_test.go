package hostagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/store"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// agentMachine is a VM whose guest agent the test crashes and restarts.
// Each DialAgent is a new connection, as vsock gives (virtio-serial's
// stale-session case is covered by the guest's announce test).
type agentMachine struct {
	mu     sync.Mutex
	serve  func(net.Conn) // the running guest agent; nil while it is down
	guests []net.Conn
	dials  int
	done   chan struct{}
}

func newAgentMachine() *agentMachine { return &agentMachine{done: make(chan struct{})} }

func (m *agentMachine) DialAgent(ctx context.Context) (net.Conn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dials++
	if m.serve == nil {
		return nil, errors.New("connection refused: the guest agent is down")
	}
	host, g := net.Pipe()
	m.guests = append(m.guests, g)
	go m.serve(g)
	return host, nil
}

// crash kills the guest agent: its end of every session goes away.
func (m *agentMachine) crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.serve = nil
	for _, g := range m.guests {
		g.Close()
	}
	m.guests = nil
}

// start brings a guest agent (back) up.
func (m *agentMachine) start(serve func(net.Conn)) {
	m.mu.Lock()
	m.serve = serve
	m.mu.Unlock()
}

func (m *agentMachine) Stop(context.Context, bool) error { return nil }
func (m *agentMachine) Wait() error                      { <-m.done; return nil }
func (m *agentMachine) Info() driver.MachineInfo         { return driver.MachineInfo{} }

// recordingOS stands in for the guest system's tools (they would change
// this host): it records what the guest agent ran.
type recordingOS struct {
	mu   sync.Mutex
	cmds []string
}

func (o *recordingOS) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cmds = append(o.cmds, strings.Join(append([]string{name}, args...), " "))
	return nil, nil
}

// SetClock is logged with the time set, to the second.
func (o *recordingOS) SetClock(t time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cmds = append(o.cmds, "setclock "+strconv.FormatInt(t.Unix(), 10))
	return nil
}

// SetHostname is logged as the system call it stands for.
func (o *recordingOS) SetHostname(name string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cmds = append(o.cmds, "sethostname "+name)
	return nil
}

func (o *recordingOS) Mount(source, target, fstype string, bind bool) error {
	args := []string{"-t", fstype, source, target}
	if bind {
		args = []string{"--bind", source, target}
	}
	_, err := o.Run(context.Background(), "mount", args...)
	return err
}

func (o *recordingOS) ran() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.cmds, "\n")
}

// guestWorld is what the guest serves in these tests: its listening ports
// (a /proc/net table the test edits) are real echo servers on this host's
// loopback, its dockerd a unix echo server.
type guestWorld struct {
	t       *testing.T
	dir     string
	procNet string
	docker  string
}

func newGuestWorld(t *testing.T) *guestWorld {
	dir := shortdir.New(t)
	w := &guestWorld{t: t, dir: dir, procNet: filepath.Join(dir, "proc-net"), docker: filepath.Join(dir, "guest-docker.sock")}
	if err := os.MkdirAll(w.procNet, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"root/etc", "root/proc/self"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "root/proc/self/mountinfo"), []byte("22 1 254:0 / / rw - ext4 /dev/vda rw\n"), 0o644)
	ln, err := net.Listen("unix", w.docker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go echoServe(ln)
	return w
}

func echoServe(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() { io.Copy(c, c); c.Close() }()
	}
}

// echoPort starts a TCP echo server on 127.0.0.1 and returns its port.
func (w *guestWorld) echoPort() int {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { ln.Close() })
	go echoServe(ln)
	return ln.Addr().(*net.TCPAddr).Port
}

// listen makes the guest's port table list exactly ports (tcp on 127.0.0.1).
func (w *guestWorld) listen(ports ...int) {
	var b strings.Builder
	b.WriteString("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
	for i, p := range ports {
		fmt.Fprintf(&b, "%4d: 0100007F:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 %d 1\n", i, p, 1000+i)
	}
	tmp := filepath.Join(w.procNet, "tcp.tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(w.procNet, "tcp")); err != nil {
		w.t.Fatal(err)
	}
}

// agent returns a fresh guest agent process, as systemd restarts it.
func (w *guestWorld) agent(os *recordingOS) func(net.Conn) {
	s := &guest.Server{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), OS: os,
		Root: filepath.Join(w.dir, "root"), ProcNet: w.procNet, PortPoll: 20 * time.Millisecond,
	}
	return func(c net.Conn) { s.Serve(context.Background(), c) }
}

func testHostAgent(t *testing.T, m driver.Machine) *hostAgent {
	t.Helper()
	// The guest log follower runs journalctl in the "guest", which here
	// is this host: give it nothing to run.
	t.Setenv("PATH", shortdir.New(t))
	inst := &store.Instance{Name: "default", Dir: shortdir.New(t)}
	ha := &hostAgent{inst: inst, events: control.NewEventLog(), run: runState{phase: "running", machine: m}}
	ha.opts.setDefaults()
	ha.events.Emit("docker-ping", "begin", "", "") // the last boot step, history now
	return ha
}

func (ha *hostAgent) phaseNow() string {
	ha.mu.Lock()
	defer ha.mu.Unlock()
	return ha.run.phase
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// echoes reports whether one round trip through a new connection works.
func echoes(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	return roundTrip(c, "ping")
}

func roundTrip(c net.Conn, msg string) error {
	c.SetDeadline(time.Now().Add(3 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	b := make([]byte, len(msg))
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	if string(b) != msg {
		return fmt.Errorf("echo %q, want %q", b, msg)
	}
	return nil
}

// A guest agent crash: connections open at the drop end, status says
// reconnecting, and once the agent is back the docker socket and the
// ports work through the new session, with the port list resynced and
// the agent's own services set up again.
func TestAgentReconnectRestoresTunnels(t *testing.T) {
	w := newGuestWorld(t)
	keep, gone, fresh := w.echoPort(), w.echoPort(), w.echoPort()
	w.listen(keep, gone)
	m := newAgentMachine()
	firstOS := &recordingOS{}
	m.start(w.agent(firstOS))
	ha := testHostAgent(t, m)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := agent.DialOnce(ctx, ha.run.machine.DialAgent, ha.prepareClient)
	if err != nil {
		t.Fatal(err)
	}
	ha.adoptClient(c)
	sock := ha.inst.DockerSocketPath()
	tun, err := openTunnels(ctx, tunnelSpec{hostSocket: sock, guestSocket: w.docker, portBind: "127.0.0.2"}, &ha.session.link)
	if err != nil {
		t.Fatal(err)
	}
	defer tun.close()
	ha.mu.Lock()
	ha.run.tunnels = tun
	ha.mu.Unlock()
	ha.startReconnect(ctx)
	defer ha.stopReconnect()

	hostAddr := func(p int) string { return fmt.Sprintf("127.0.0.2:%d", p) }
	waitFor(t, 5*time.Second, "ports forwarded at first", func() bool {
		return echoes("tcp", hostAddr(keep)) == nil && echoes("tcp", hostAddr(gone)) == nil
	})
	if err := echoes("unix", sock); err != nil {
		t.Fatalf("docker socket before the crash: %v", err)
	}
	openDocker, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer openDocker.Close()
	openPort, err := net.Dial("tcp", hostAddr(keep))
	if err != nil {
		t.Fatal(err)
	}
	defer openPort.Close()
	for _, oc := range []net.Conn{openDocker, openPort} {
		if err := roundTrip(oc, "before"); err != nil {
			t.Fatal(err)
		}
	}

	m.crash()
	w.listen(keep, fresh) // what changed while no watch ran
	for name, oc := range map[string]net.Conn{"docker": openDocker, "port": openPort} {
		oc.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := oc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s connection open at the drop: read %v, want it closed", name, err)
		}
	}
	waitFor(t, 2*time.Second, "status shows reconnecting", func() bool { st := ha.status(); return st.Phase == control.PhaseReconnecting && st.Step == "" })

	// A docker client that connects while the agent is away waits for it.
	during := make(chan error, 1)
	go func() { during <- echoes("unix", sock) }()
	// So does `vmdock ssh`.
	sshDuring := make(chan error, 1)
	go func() {
		st, err := ha.openAgentStream(ctx)
		if err == nil {
			st.Close()
		}
		sshDuring <- err
	}()
	time.Sleep(300 * time.Millisecond)

	secondOS := &recordingOS{}
	m.start(w.agent(secondOS))
	back := time.Now()
	took := waitFor(t, 5*time.Second, "back to running", func() bool { return ha.phaseNow() == "running" })
	t.Logf("reconnected %s after the guest agent came back", took)
	if err := <-during; err != nil {
		t.Fatalf("docker connection made during the reconnect: %v", err)
	}
	if err := <-sshDuring; err != nil {
		t.Fatalf("agent stream (vmdock ssh) asked for during the reconnect: %v", err)
	}
	if err := echoes("unix", sock); err != nil {
		t.Fatalf("docker socket after the reconnect: %v", err)
	}
	waitFor(t, 5*time.Second, "ports resynced", func() bool {
		return echoes("tcp", hostAddr(keep)) == nil && echoes("tcp", hostAddr(fresh)) == nil && echoes("tcp", hostAddr(gone)) != nil
	})
	t.Logf("docker socket and ports back %s after the guest agent", time.Since(back))
	var ports []int
	for _, p := range ha.status().Ports {
		ports = append(ports, p.GuestPort)
	}
	if len(ports) != 2 || ports[0] != min(keep, fresh) || ports[1] != max(keep, fresh) {
		t.Fatalf("status ports %v, want %d and %d", ports, keep, fresh)
	}
	if cur, _ := ha.session.link.state(); !ended(c) || cur == c {
		t.Fatal("the first session is still in use")
	}
	waitFor(t, 5*time.Second, "guest services restored on the new agent", func() bool {
		return strings.Contains(secondOS.ran(), "sethostname vmdock")
	})
	if ran := secondOS.ran(); strings.Contains(ran, "resize2fs") || strings.Contains(ran, "mount") {
		t.Errorf("the reconnect redid disk setup:\n%s", ran)
	}
	past, _, stop := ha.events.Follow()
	stop()
	var notes []string
	for _, ev := range past {
		if ev.Step == "agent" {
			notes = append(notes, ev.Detail)
		}
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "reconnecting") || !strings.Contains(notes[1], "reconnected") {
		t.Errorf("agent events %q", notes)
	}
}

// Streams the guest opens (host access) are served on the new session too.
func TestAgentReconnectServesGuestStreams(t *testing.T) {
	hostSvc, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostSvc.Close()
	go echoServe(hostSvc)
	port := hostSvc.Addr().(*net.TCPAddr).Port

	results := make(chan error, 4)
	// This guest answers Info, then at once dials the host's port, as a
	// container using host access right after an agent restart would.
	hostDialer := func(g net.Conn) {
		sess, ok := scriptedSession(g)
		if !ok {
			return
		}
		defer sess.Close()
		info, err := sess.AcceptStream()
		if err != nil {
			return
		}
		var req agent.Request
		agent.ReadJSONLine(info, &req)
		agent.WriteJSONLine(info, agent.Response{OK: true, Info: &agent.Info{Version: "test"}})
		info.Close()
		results <- hostDial(sess, port)
		for {
			st, err := sess.AcceptStream() // the log follower
			if err != nil {
				return
			}
			st.Close()
		}
	}
	m := newAgentMachine()
	m.start(hostDialer)
	ha := testHostAgent(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := agent.DialOnce(ctx, ha.run.machine.DialAgent, ha.prepareClient)
	if err != nil {
		t.Fatal(err)
	}
	ha.adoptClient(c)
	ha.startReconnect(ctx)
	defer ha.stopReconnect()
	for round := range 2 {
		select {
		case err := <-results:
			if err != nil {
				t.Fatalf("host access on session %d: %v", round+1, err)
			}
		case <-ctx.Done():
			t.Fatalf("no host access stream on session %d", round+1)
		}
		m.crash()
		m.start(hostDialer)
	}
}

// scriptedSession is the guest end of a test agent: the handshake, then a
// yamux session the test scripts by hand.
func scriptedSession(g net.Conn) (*yamux.Session, bool) {
	if agent.GuestHello(g) != nil {
		return nil, false
	}
	sess, err := yamux.Server(g, agent.YamuxConfig(slog.Default()))
	return sess, err == nil
}

func hostDial(sess *yamux.Session, port int) error {
	st, err := sess.OpenStream()
	if err != nil {
		return err
	}
	defer st.Close()
	if err := agent.WriteJSONLine(st, agent.Request{Op: agent.OpHostDial, Network: "tcp", Port: port}); err != nil {
		return err
	}
	if _, err := agent.ReadResponse(st); err != nil {
		return err
	}
	return roundTrip(st, "host-access")
}

// A session lost in the middle of a boot step is redialled and the
// step's requests run once more on the new one; the boot goes on.
func TestBootStepRedialsASessionLostUnderIt(t *testing.T) {
	m := newAgentMachine()
	w := newGuestWorld(t)
	m.start(w.agent(&recordingOS{}))
	ha := testHostAgent(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := ha.redial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ha.adoptClient(first)

	var used []*agent.Client
	err = ha.onSession(ctx, "setup", func(c *agent.Client) error {
		used = append(used, c)
		if len(used) == 1 {
			m.crash()
			m.start(w.agent(&recordingOS{}))
			<-c.Done()
		}
		_, err := c.Info(ctx)
		return err
	})
	if err != nil {
		t.Fatalf("boot step after a lost session: %v", err)
	}
	if len(used) != 2 || used[0] != first || used[1] == first {
		t.Fatalf("requests ran on %d sessions (first reused: %v), want the lost one then a new one", len(used), len(used) > 1 && used[1] == first)
	}
	if c, _ := ha.session.link.state(); c != used[1] {
		t.Error("the new session is not the one the link hands out")
	}

	// A step that fails on a live session fails at once, not redialled.
	calls := 0
	err = ha.onSession(ctx, "mounts", func(*agent.Client) error { calls++; return errors.New("mount refused") })
	if err == nil || calls != 1 {
		t.Fatalf("refusal on a live session: err %v after %d calls, want the error after 1", err, calls)
	}
}
