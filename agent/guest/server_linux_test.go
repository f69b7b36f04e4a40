package guest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"

	"github.com/vmdock/vmdock/internal/shortdir"
)

func newTestServer(t *testing.T) (*Server, *guestostest.FakeOS) {
	t.Helper()
	fos := &guestostest.FakeOS{}
	root := shortdir.New(t)
	must(t, os.MkdirAll(filepath.Join(root, "proc/self"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "proc/self/mountinfo"),
		[]byte("22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"), 0o644))
	s := &Server{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), OS: fos, Root: root, PortPoll: 20 * time.Millisecond}
	return s, fos
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// connect serves s on one end of a socketpair-like pipe and returns the
// connected host client.
func connect(t *testing.T, s *Server) (*agent.Client, chan error) {
	t.Helper()
	h, g := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), g) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.Connect(ctx, h)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, done
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestInfoAndSetTime(t *testing.T) {
	s, fos := newTestServer(t)
	c, _ := connect(t, s)
	info, err := c.Info(ctx(t))
	if err != nil || info.Kernel == "" || info.Arch == "" || info.Uptime <= 0 {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	want := time.Unix(1700000000, 5)
	must(t, c.SetTime(ctx(t), want))
	if !fos.Clock.Equal(want) {
		t.Fatalf("clock = %v, want %v", fos.Clock, want)
	}
}

func TestDialTCPUnixUDP(t *testing.T) {
	s, _ := newTestServer(t)
	c, _ := connect(t, s)

	tl, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer tl.Close()
	ul, err := net.Listen("unix", filepath.Join(shortdir.New(t), "s.sock"))
	must(t, err)
	defer ul.Close()
	for _, l := range []net.Listener{tl, ul} {
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(conn, conn); conn.Close() }()
			}
		}()
	}
	for _, tc := range []struct{ network, addr string }{{"tcp", tl.Addr().String()}, {"unix", ul.Addr().String()}} {
		conn, err := c.Dial(ctx(t), tc.network, tc.addr)
		if err != nil {
			t.Fatalf("Dial %s: %v", tc.network, err)
		}
		io.WriteString(conn, "ping")
		conn.Close() // half-close: the echo still comes back
		b, err := io.ReadAll(conn)
		if err != nil || string(b) != "ping" {
			t.Fatalf("%s echo = %q, %v", tc.network, b, err)
		}
	}

	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	must(t, err)
	defer pc.Close()
	go func() {
		buf := make([]byte, 2000)
		for {
			n, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("re:"), buf[:n]...), a)
		}
	}()
	st, err := c.Dial(ctx(t), "udp", pc.LocalAddr().String())
	must(t, err)
	uc := agent.NewDatagramConn(st) // udp streams carry framed datagrams
	defer uc.Close()
	for _, m := range []string{"a", "bb"} {
		uc.Write([]byte(m))
		buf := make([]byte, 100)
		n, err := uc.Read(buf)
		if err != nil || string(buf[:n]) != "re:"+m {
			t.Fatalf("udp echo = %q, %v", buf[:n], err)
		}
	}

	if _, err := c.Dial(ctx(t), "tcp", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("dial closed port: %v", err)
	}
	if _, err := c.Dial(ctx(t), "sctp", "x"); err == nil {
		t.Fatal("dial sctp: want an error")
	}
}

func TestWatchPorts(t *testing.T) {
	s, _ := newTestServer(t)
	c, _ := connect(t, s)
	own, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer own.Close()
	s.rooms().ports.HideOwnPort("tcp", own.Addr().(*net.TCPAddr).Port)

	wctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch, err := c.WatchPorts(wctx)
	must(t, err)
	await := func(want agent.PortEvent) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					t.Fatal("watch ended")
				}
				if ev.Port == own.Addr().(*net.TCPAddr).Port {
					t.Fatalf("agent's own listener reported: %+v", ev)
				}
				if ev == want {
					return
				}
			case <-timeout:
				t.Fatalf("no event %+v", want)
			}
		}
	}
	tcp4, err := net.Listen("tcp4", "127.0.0.1:0")
	must(t, err)
	p4 := tcp4.Addr().(*net.TCPAddr).Port
	await(agent.PortEvent{Added: true, Proto: "tcp", IP: "127.0.0.1", Port: p4})
	tcp4.Close()
	await(agent.PortEvent{Proto: "tcp", IP: "127.0.0.1", Port: p4})

	if tcp6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		p6 := tcp6.Addr().(*net.TCPAddr).Port
		await(agent.PortEvent{Added: true, Proto: "tcp", IP: "::1", Port: p6})
		tcp6.Close()
		await(agent.PortEvent{Proto: "tcp", IP: "::1", Port: p6})
	} else {
		t.Logf("no IPv6 loopback here: %v", err)
	}

	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	must(t, err)
	pu := udp.LocalAddr().(*net.UDPAddr).Port
	await(agent.PortEvent{Added: true, Proto: "udp", IP: "127.0.0.1", Port: pu})
	udp.Close()
	await(agent.PortEvent{Proto: "udp", IP: "127.0.0.1", Port: pu})
}

func TestHostDialAndReconnect(t *testing.T) {
	s, _ := newTestServer(t)
	for round := 0; round < 2; round++ {
		c, done := connect(t, s)
		c.HandleGuestStreams(func(req agent.Request, conn net.Conn) {
			agent.Reply(conn, nil)
			fmt.Fprintf(conn, "%s:%d round %d", req.Op, req.Port, round)
			conn.Close()
		})
		// Wait until the guest saw this session.
		if _, err := c.Info(ctx(t)); err != nil {
			t.Fatal(err)
		}
		st, err := s.openToHost(agent.Request{Op: agent.OpHostDial, Network: "tcp", Port: 9003})
		if err != nil {
			t.Fatalf("round %d: openToHost: %v", round, err)
		}
		b, _ := io.ReadAll(st)
		if want := fmt.Sprintf("host-dial:9003 round %d", round); string(b) != want {
			t.Fatalf("got %q, want %q", b, want)
		}
		st.Close()
		c.Close() // the host agent goes away
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not notice the host leaving")
		}
		if _, err := s.openToHost(agent.Request{Op: agent.OpHostDial, Port: 1}); err == nil {
			t.Fatal("host-dial without a session: want an error")
		}
	}
}

func TestWaitHostReaderRetriesEOF(t *testing.T) {
	r := &eofThen{eofs: 2, data: "x"}
	n, err := waitHostReader{ctx: context.Background(), r: r}.Read(make([]byte, 4))
	if n != 1 || err != nil || r.eofs != 0 {
		t.Fatalf("Read = %d, %v (eofs left %d)", n, err, r.eofs)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (waitHostReader{ctx: cctx, r: &eofThen{eofs: 1}}).Read(make([]byte, 1)); err == nil {
		t.Fatal("cancelled wait: want an error")
	}
}

type eofThen struct {
	eofs int
	data string
}

func (e *eofThen) Read(p []byte) (int, error) {
	if e.eofs > 0 {
		e.eofs--
		return 0, io.EOF
	}
	return copy(p, e.data), nil
}

// TestWatchPortsIdlesUntilHostActivity: once the host has been quiet for
// PortPollBusy the watch scans only every PortPollIdle, and the next stream
// the host opens (here an info call, in life a docker API call) makes it
// look again at once.
func TestWatchPortsIdlesUntilHostActivity(t *testing.T) {
	s, _ := newTestServer(t)
	s.PortPollBusy, s.PortPollIdle = 150*time.Millisecond, time.Hour
	c, _ := connect(t, s)
	wctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ch, err := c.WatchPorts(wctx)
	must(t, err)
	time.Sleep(500 * time.Millisecond) // past the busy window: idling now

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	want := agent.PortEvent{Added: true, Proto: "tcp", IP: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	seen := func(within time.Duration) bool {
		timeout := time.After(within)
		for {
			select {
			case ev := <-ch:
				if ev == want {
					return true
				}
			case <-timeout:
				return false
			}
		}
	}
	if seen(400 * time.Millisecond) {
		t.Fatal("an idle watch scanned on the fast period")
	}
	if _, err := c.Info(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !seen(5 * time.Second) {
		t.Fatal("host activity did not wake the idle watch")
	}
}

// Before a pause the keepalive stops until the next request; a quiesce
// a docker call cancelled reports it.
func TestQuiesceSuspendsKeepalive(t *testing.T) {
	s, _ := newTestServer(t)
	hostEnd, guestEnd := net.Pipe()
	defer hostEnd.Close()
	sess, err := yamux.Server(guestEnd, agent.YamuxConfig(s.log()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	go func() {
		if c, err := yamux.Client(hostEnd, agent.YamuxConfig(s.log())); err == nil {
			<-c.CloseChan()
		}
	}()
	s.keepalive = agent.StartKeepalive(sess, time.Hour, s.log())
	if err := s.quiesce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.keepalive.Suspended() {
		t.Error("keepalive still pinging after quiesce")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.quiesce(ctx); err == nil {
		t.Error("a cancelled quiesce (a docker call came) reported success")
	}
}

// The runtime requests start their runtime and return once the guest knows
// a resolver; containerd's start turns on the port watch's DNAT scan.
func TestRuntimeRequests(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, os.WriteFile(filepath.Join(s.Root, "etc/resolv.conf"), []byte("nameserver 192.0.2.53\n"), 0o644))
	sock := filepath.Join(s.Root, agent.GuestContainerdSocket)
	must(t, os.MkdirAll(filepath.Dir(sock), 0o755))
	l, err := net.Listen("unix", sock)
	must(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	fos.Outputs = map[string]string{"iptables-save -t nat": "*nat\n-A CNI-DN-1 -p tcp -m tcp --dport 18090 -j DNAT --to-destination 10.4.0.3:80\nCOMMIT\n"}
	c, _ := connect(t, s)
	must(t, c.StartContainerd(ctx(t)))
	if !strings.Contains(fos.Ran(), "systemctl start --job-mode=ignore-dependencies containerd") {
		t.Errorf("containerd not started:\n%s", fos.Ran())
	}
	wctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	ports, err := c.WatchPorts(wctx)
	must(t, err)
	if !awaitPort(ports, agent.PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: 18090}) {
		t.Error("the port watch does not read DNAT rules after containerd started")
	}

	s, fos = newTestServer(t)
	must(t, os.WriteFile(filepath.Join(s.Root, "etc/resolv.conf"), []byte("nameserver 192.0.2.53\n"), 0o644))
	s.DockerSocket = filepath.Join(shortdir.New(t), "docker.sock")
	dl, err := net.Listen("unix", s.DockerSocket)
	must(t, err)
	defer dl.Close()
	go http.Serve(dl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "OK") }))
	c, _ = connect(t, s)
	must(t, c.StartDocker(ctx(t)))
	if !strings.Contains(fos.Ran(), "systemctl start --job-mode=ignore-dependencies docker.service") {
		t.Errorf("docker not started:\n%s", fos.Ran())
	}
}

// awaitPort reads the watch's events until want, false if it does not come.
func awaitPort(ch <-chan agent.PortEvent, want agent.PortEvent) bool {
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return false
			}
			if ev == want {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// A server on the real system edits the real root and logs to slog's
// default without a logger of its own.
func TestNewServerDefaults(t *testing.T) {
	s := NewServer(nil)
	if got := s.path("/etc/hosts"); got != "/etc/hosts" {
		t.Errorf("path = %s, want the real root's", got)
	}
	if s.log() == nil {
		t.Error("no logger")
	}
}

// An exec request is handed its stream.
func TestExecThroughTheServer(t *testing.T) {
	s, _ := newTestServer(t)
	c, _ := connect(t, s)
	code, err := c.Exec(ctx(t), agent.ExecRequest{Argv: []string{"/bin/sh", "-c", "exit 3"}}, nil, nil, nil, nil)
	if err != nil || code != 3 {
		t.Fatalf("code %d, %v; want 3", code, err)
	}
}

// A request missing its body, a time that is no time and an op the agent
// does not know are refused with the reason; the idle check and a touch
// of nothing answer.
func TestAnswerRefusesBadRequests(t *testing.T) {
	s, _ := newTestServer(t)
	for _, tc := range []struct {
		req  agent.Request
		want string
	}{
		{agent.Request{Op: agent.OpSetup}, "setup request without setup"},
		{agent.Request{Op: agent.OpMount}, "mount request without mount"},
		{agent.Request{Op: agent.OpSetTime, Time: -5}, "time -5 is not a positive"},
		{agent.Request{Op: "fly"}, `unknown op "fly"`},
	} {
		if _, err := s.answer(ctx(t), tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.req.Op, err, tc.want)
		}
	}
	resp, err := s.answer(ctx(t), agent.Request{Op: agent.OpIdleCheck})
	if err != nil || resp.Idle == nil || resp.Idle.RunningContainers != 0 {
		t.Errorf("idle check on a guest without containers: %+v, %v", resp.Idle, err)
	}
	if _, err := s.answer(ctx(t), agent.Request{Op: agent.OpTouch}); err != nil {
		t.Errorf("touch of nothing: %v", err)
	}
}

// A power-off request is answered before the guest powers off, so the host
// hears the agent agreed.
func TestPowerOffAnswersFirst(t *testing.T) {
	s, fos := newTestServer(t)
	h, g := net.Pipe()
	defer h.Close()
	done := make(chan struct{})
	go func() { s.handle(ctx(t), g); close(done) }()
	must(t, agent.WriteJSONLine(h, agent.Request{Op: agent.OpPowerOff}))
	if _, err := agent.ReadResponse(h); err != nil {
		t.Fatalf("power-off answer: %v", err)
	}
	if strings.Contains(fos.Ran(), "poweroff") {
		t.Error("powered off before the answer could leave")
	}
	<-done
	if !strings.Contains(fos.Ran(), "systemctl poweroff") {
		t.Errorf("ran:\n%s\nwant systemctl poweroff", fos.Ran())
	}
}
