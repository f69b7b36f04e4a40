package forward

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func newForwarder(t *testing.T, g *fakeGuest, opts PortForwarderConfig) *PortForwarder {
	t.Helper()
	opts.Dial = g.dial
	f := NewPortForwarder(opts)
	t.Cleanup(func() { f.Close() })
	return f
}

func TestPortForwarderTCPHalfClose(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	countServer(t, srv)

	base := runtime.NumGoroutine()
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, srv.Addr().String())
	f := newForwarder(t, g, PortForwarderConfig{})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})

	c, err := net.Dial("tcp", portAddr(port))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	payload := bytes.Repeat([]byte("x"), 100_000)
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := "got 100000 bytes: "; !strings.HasPrefix(string(got), want) {
		t.Fatalf("reply %.40q, want prefix %q", got, want)
	}
	if d := g.dialLog(); len(d) != 1 || d[0] != "tcp "+portAddr(port) {
		t.Errorf("guest dials = %q, want [tcp %s]", d, portAddr(port))
	}
	if p := f.Ports(); len(p) != 1 || p[0].Proto != "tcp" || p[0].GuestPort != port || p[0].HostAddr != portAddr(port) ||
		p[0].Path != PathTunnel || p[0].Error != "" || len(p[0].HostAddrs) == 0 || p[0].HostAddrs[0] != portAddr(port) {
		t.Errorf("Ports() = %+v", p)
	}
	f.Close()
	if !eventually(2*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		t.Errorf("goroutines: %d after Close, %d before", runtime.NumGoroutine(), base)
	}
}

func TestPortForwarderConcurrentTCP(t *testing.T) {
	srv := echoTCPServer(t)
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, srv.Addr().String())
	f := newForwarder(t, g, PortForwarderConfig{})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "127.0.0.1", Port: port})

	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", portAddr(port))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			msg := []byte(fmt.Sprintf("conn-%02d-%s", i, strings.Repeat("y", 4000)))
			if _, err := c.Write(msg); err != nil {
				errs <- err
				return
			}
			c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			if err != nil {
				errs <- fmt.Errorf("conn %d: %w", i, err)
				return
			}
			if !bytes.Equal(got, msg) {
				errs <- fmt.Errorf("conn %d: got %d bytes back, want %d", i, len(got), len(msg))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if d := g.dialLog(); len(d) != n {
		t.Errorf("%d guest dials, want %d", len(d), n)
	}
}

func udpExchange(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("reply to %q: %v", msg, err)
	}
	return string(buf[:n])
}

func TestPortForwarderUDPTwoPeers(t *testing.T) {
	srv := echoUDPServer(t)
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, srv.LocalAddr().String())
	f := newForwarder(t, g, PortForwarderConfig{})
	f.Apply(PortEvent{Added: true, Proto: "udp", IP: "0.0.0.0", Port: port})

	var peers []net.Conn
	for range 2 {
		c, err := net.Dial("udp", portAddr(port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		peers = append(peers, c)
	}
	for round := range 3 {
		for i, c := range peers {
			msg := fmt.Sprintf("peer%d-round%d", i, round)
			if got := udpExchange(t, c, msg); got != "echo:"+msg {
				t.Errorf("peer %d got %q, want %q", i, got, "echo:"+msg)
			}
		}
	}
	if d := g.dialLog(); len(d) != 2 {
		t.Errorf("guest dials = %q, want one stream per peer (2)", d)
	}
}

func TestPortForwarderUDPIdleSessionReaped(t *testing.T) {
	srv := echoUDPServer(t)
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, srv.LocalAddr().String())
	f := newForwarder(t, g, PortForwarderConfig{UDPIdleTimeout: 150 * time.Millisecond})
	f.Apply(PortEvent{Added: true, Proto: "udp", IP: "0.0.0.0", Port: port})

	c, err := net.Dial("udp", portAddr(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := udpExchange(t, c, "one"); got != "echo:one" {
		t.Fatalf("got %q", got)
	}
	streams := g.tracked()
	if len(streams) != 1 {
		t.Fatalf("%d guest streams, want 1", len(streams))
	}
	select {
	case <-streams[0].closed:
	case <-time.After(2 * time.Second):
		t.Fatal("idle UDP session's guest stream was not closed")
	}
	// The peer's next datagram opens a new session.
	if got := udpExchange(t, c, "two"); got != "echo:two" {
		t.Fatalf("got %q", got)
	}
	if n := len(g.dialLog()); n != 2 {
		t.Errorf("%d guest dials, want 2 (a fresh stream after the reap)", n)
	}
}

func TestPortForwarderHostPortTaken(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	srv := echoTCPServer(t)
	g := newFakeGuest(t)
	okPort := freePort(t)
	g.route(okPort, srv.Addr().String())
	f := newForwarder(t, g, PortForwarderConfig{})
	f.hosts = []string{"127.0.0.1"} // one family: the port taken there is not served at all
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: busyPort})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: okPort})

	byPort := map[int]ForwardedPort{}
	for _, p := range f.Ports() {
		byPort[p.GuestPort] = p
	}
	if e := byPort[busyPort].Error; !strings.Contains(e, "already in use") {
		t.Errorf("busy port error = %q, want it to say the port is in use", e)
	}
	if e := byPort[okPort].Error; e != "" {
		t.Errorf("free port error = %q, want none", e)
	}
	c, err := net.Dial("tcp", portAddr(okPort))
	if err != nil {
		t.Fatalf("the other port must still be forwarded: %v", err)
	}
	c.Close()
	// Removing the failed forward clears its record.
	f.Apply(PortEvent{Added: false, Proto: "tcp", IP: "0.0.0.0", Port: busyPort})
	if p := f.Ports(); len(p) != 1 || p[0].GuestPort != okPort {
		t.Errorf("Ports() after removal = %+v", p)
	}
}

func TestPortForwarderPrivilegedPortRecorded(t *testing.T) {
	g := newFakeGuest(t)
	f := newForwarder(t, g, PortForwarderConfig{})
	f.listenTCP = func(addr string) (net.Listener, error) {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EACCES)}
	}
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: 80})
	p := f.Ports()
	if len(p) != 1 || !strings.Contains(p[0].Error, "privileged") || p[0].HostAddr != "127.0.0.1:80" {
		t.Fatalf("Ports() = %+v, want port 80 recorded as privileged", p)
	}
}

func TestPortForwarderRemoveFreesPort(t *testing.T) {
	for _, proto := range []string{"tcp", "udp"} {
		t.Run(proto, func(t *testing.T) {
			g := newFakeGuest(t)
			port := freePort(t)
			f := newForwarder(t, g, PortForwarderConfig{})
			f.Apply(PortEvent{Added: true, Proto: proto, IP: "0.0.0.0", Port: port})
			if err := tryBind(proto, port); err == nil {
				t.Fatalf("port %d/%s was free while forwarded", port, proto)
			}
			f.Apply(PortEvent{Added: false, Proto: proto, IP: "0.0.0.0", Port: port})
			if !eventually(2*time.Second, func() bool { return tryBind(proto, port) == nil }) {
				t.Fatalf("port %d/%s still taken 2s after removal", port, proto)
			}
			if p := f.Ports(); len(p) != 0 {
				t.Errorf("Ports() = %+v, want none", p)
			}
		})
	}
}

func tryBind(proto string, port int) error {
	if proto == "udp" {
		pc, err := net.ListenPacket("udp", portAddr(port))
		if err == nil {
			pc.Close()
		}
		return err
	}
	ln, err := net.Listen("tcp", portAddr(port))
	if err == nil {
		ln.Close()
	}
	return err
}

func TestPortForwarderSharedListenerRefCount(t *testing.T) {
	srv := echoTCPServer(t)
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, srv.Addr().String())
	f := newForwarder(t, g, PortForwarderConfig{})

	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "::", Port: port})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "::", Port: port}) // repeated: no effect
	if p := f.Ports(); len(p) != 1 || p[0].Error != "" {
		t.Fatalf("Ports() = %+v, want one healthy forward", p)
	}
	f.Apply(PortEvent{Added: false, Proto: "tcp", IP: "0.0.0.0", Port: port})
	if err := tryBind("tcp", port); err == nil {
		t.Fatal("listener closed while the guest still listens on ::")
	}
	// Only the v6 wildcard is left: new connections go to [::1] in the guest.
	c, err := net.Dial("tcp", portAddr(port))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !eventually(2*time.Second, func() bool { return len(g.dialLog()) == 1 }) {
		t.Fatal("no guest dial")
	}
	if d := g.dialLog(); d[0] != fmt.Sprintf("tcp [::1]:%d", port) {
		t.Errorf("guest dial %q, want tcp [::1]:%d", d[0], port)
	}
	f.Apply(PortEvent{Added: false, Proto: "tcp", IP: "::", Port: port})
	if !eventually(2*time.Second, func() bool { return tryBind("tcp", port) == nil }) {
		t.Fatal("listener still open after the last guest listener went away")
	}
}

func TestPortForwarderRulesApplied(t *testing.T) {
	srv := echoTCPServer(t)
	g := newFakeGuest(t)
	guestPort, hostPort, ignored := freePort(t), freePort(t), freePort(t)
	g.route(guestPort, srv.Addr().String())
	rules, err := ParseRules([]RuleSpec{{Guest: fmt.Sprint(guestPort), Host: fmt.Sprint(hostPort)}}, []string{fmt.Sprint(ignored)})
	if err != nil {
		t.Fatal(err)
	}
	f := newForwarder(t, g, PortForwarderConfig{Rules: rules})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: guestPort})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: ignored})
	p := f.Ports()
	if len(p) != 1 || p[0].HostAddr != portAddr(hostPort) {
		t.Fatalf("Ports() = %+v, want only guest %d on host %d", p, guestPort, hostPort)
	}
	c, err := net.Dial("tcp", portAddr(hostPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("hi"))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi" {
		t.Fatalf("echo through mapped port: %q, %v", buf, err)
	}
}

func TestPortForwarderBadBindRecorded(t *testing.T) {
	f := newForwarder(t, newFakeGuest(t), PortForwarderConfig{BindAddr: "192.0.2.1"}) // not on this machine
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: freePort(t)})
	if p := f.Ports(); len(p) != 1 || !strings.Contains(p[0].Error, "192.0.2.1") {
		t.Fatalf("Ports() = %+v, want the bind failure recorded", p)
	}
}

func TestGuestHost(t *testing.T) {
	tests := []struct {
		ips  []string
		want string
	}{
		{[]string{"0.0.0.0"}, "127.0.0.1"},
		{[]string{"127.0.0.1"}, "127.0.0.1"},
		{[]string{"::", "0.0.0.0"}, "127.0.0.1"},
		{[]string{"::"}, "::1"},
		{[]string{"::1"}, "::1"},
		{[]string{"::ffff:127.0.0.1"}, "127.0.0.1"},
		{[]string{"172.17.0.1"}, "172.17.0.1"},
		{[]string{"172.17.0.1", "::"}, "::1"},
		{[]string{"garbage"}, "127.0.0.1"},
	}
	for _, tt := range tests {
		if got := guestHost(tt.ips); got != tt.want {
			t.Errorf("guestHost(%q) = %q, want %q", tt.ips, got, tt.want)
		}
	}
}
