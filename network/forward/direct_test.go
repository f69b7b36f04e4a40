package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeDirect stands in for QEMU's hostfwd: OpenPort returns the address
// of a real server, or fails.
type fakeDirect struct {
	mu         sync.Mutex
	to         map[int]string // guest port -> host address; missing: fail
	opened     []int
	closed     []int
	handshakes int // 0: one, like QEMU's hostfwd
}

func (d *fakeDirect) Handshakes() int { return d.handshakes }

func (d *fakeDirect) OpenPort(_ context.Context, port int) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	addr, ok := d.to[port]
	if !ok {
		return "", errors.New("no hostfwd here")
	}
	d.opened = append(d.opened, port)
	return addr, nil
}

func (d *fakeDirect) ClosePort(_ context.Context, port int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = append(d.closed, port)
	return nil
}

func (d *fakeDirect) closedPorts() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.closed...)
}

// taggedServer answers every connection with tag, so a test sees which
// path a connection took.
func taggedServer(t *testing.T, tag string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(tag))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func readVia(t *testing.T, port int) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", portAddr(port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

func pathOf(f *PortForwarder, port int) string {
	for _, p := range f.Ports() {
		if p.GuestPort == port {
			return p.Path
		}
	}
	return ""
}

func TestReachableDirectly(t *testing.T) {
	cases := []struct {
		proto string
		ips   []string
		want  bool
	}{
		{"tcp", []string{"0.0.0.0"}, true},
		{"tcp", []string{"::"}, true},
		{"tcp", []string{"10.0.2.15"}, true},
		{"tcp", []string{"127.0.0.1"}, false},
		{"tcp", []string{"::1"}, false},
		{"tcp", []string{"127.0.0.1", "0.0.0.0"}, true},
		{"udp", []string{"0.0.0.0"}, false},
		{"tcp", nil, false},
	}
	for _, c := range cases {
		if got := reachableDirectly(c.proto, c.ips, false); got != c.want {
			t.Errorf("reachableDirectly(%s, %v, no udp) = %v, want %v", c.proto, c.ips, got, c.want)
		}
	}
	udpCases := []struct {
		ips  []string
		want bool
	}{
		{[]string{"0.0.0.0"}, true},
		{[]string{"10.0.2.15"}, true},
		{[]string{"127.0.0.1"}, false},
	}
	for _, c := range udpCases {
		if got := reachableDirectly("udp", c.ips, true); got != c.want {
			t.Errorf("reachableDirectly(udp, %v, udp) = %v, want %v", c.ips, got, c.want)
		}
	}
}

// A port bound on the guest's wildcard goes direct once the path is open;
// one bound to the guest's loopback only tunnels (a direct path cannot
// reach it); a port whose direct path cannot be opened tunnels.
func TestPortForwarderChoosesThePathPerPort(t *testing.T) {
	g := newFakeGuest(t)
	// The servers listen before the ports are picked, so none of them
	// holds a port the forwarder is to listen on.
	tunnels := []string{taggedServer(t, "tunnel"), taggedServer(t, "tunnel"), taggedServer(t, "tunnel")}
	directs := []string{taggedServer(t, "direct"), taggedServer(t, "direct")}
	wild, loop, nohostfwd := freePort(t), freePort(t), freePort(t)
	for i, p := range []int{wild, loop, nohostfwd} {
		g.route(p, tunnels[i])
	}
	d := &fakeDirect{to: map[int]string{wild: directs[0], loop: directs[1]}}
	f := newForwarder(t, g, PortForwarderConfig{Direct: d})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: wild})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "127.0.0.1", Port: loop})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "::", Port: nohostfwd})
	if !eventually(2*time.Second, func() bool { return pathOf(f, wild) == PathDirect }) {
		t.Fatalf("wildcard port path %q, want direct", pathOf(f, wild))
	}
	if got := readVia(t, wild); got != "direct" {
		t.Errorf("wildcard port went %q, want direct", got)
	}
	for _, p := range []int{loop, nohostfwd} {
		if path := pathOf(f, p); path != PathTunnel {
			t.Errorf("port %d path %q, want tunnel", p, path)
		}
		if got := readVia(t, p); got != "tunnel" {
			t.Errorf("port %d went %q, want tunnel", p, got)
		}
	}
	// The port goes away: its hostfwd rule is removed.
	f.Apply(PortEvent{Added: false, Proto: "tcp", IP: "0.0.0.0", Port: wild})
	if !eventually(2*time.Second, func() bool { return len(d.closedPorts()) == 1 && d.closedPorts()[0] == wild }) {
		t.Errorf("closed direct paths %v, want [%d]", d.closedPorts(), wild)
	}
}

// A direct path that refuses the connection falls back to the tunnel for
// that connection: the client never sees the failure.
func TestPortForwarderFallsBackWhenTheDirectDialFails(t *testing.T) {
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, taggedServer(t, "tunnel"))
	dead := freePort(t) // nothing listens there
	d := &fakeDirect{to: map[int]string{port: net.JoinHostPort("127.0.0.1", strconv.Itoa(dead))}}
	f := newForwarder(t, g, PortForwarderConfig{Direct: d})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	if !eventually(2*time.Second, func() bool { return pathOf(f, port) == PathDirect }) {
		t.Fatal("direct path never opened")
	}
	if got := readVia(t, port); got != "tunnel" {
		t.Errorf("connection went %q, want the tunnel after the direct dial failed", got)
	}
}

// Direct dials run one at a time (QEMU's backlog of 1 turns parallel
// handshakes into SYN cookies that reset busy connections), and every
// connection of a burst is answered, direct or, past its turn, tunnelled.
func TestPortForwarderDialsTheDirectPathOneAtATime(t *testing.T) {
	if most, _ := directBurst(t, 0, 2*time.Millisecond); most != 1 {
		t.Errorf("%d direct dials ran at once, want 1", most)
	}
}

// A path that takes many handshakes (a routed guest, vz's NAT) gets them
// at once, up to its limit.
func TestPortForwarderDialsAParallelDirectPathUpToItsLimit(t *testing.T) {
	most, direct := directBurst(t, 4, 5*time.Millisecond)
	if most < 2 || most > 4 {
		t.Errorf("%d direct dials ran at once, want 2 to 4", most)
	}
	if direct < 15 {
		t.Errorf("%d of 20 connections went direct, want nearly all with 4 handshakes at once", direct)
	}
}

// directBurst opens 20 connections at once through a port on the direct
// path, whose dials take handshake each; it returns the most dials in
// flight at once and how many connections went direct. None may be lost.
func directBurst(t *testing.T, handshakes int, handshake time.Duration) (most int32, direct int) {
	t.Helper()
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, taggedServer(t, "tunnel"))
	d := &fakeDirect{to: map[int]string{port: taggedServer(t, "direct")}, handshakes: handshakes}
	f := newForwarder(t, g, PortForwarderConfig{Direct: d})
	var inFlight, peak atomic.Int32
	f.directDial = func(ctx context.Context, addr string) (net.Conn, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := peak.Load()
			if n <= m || peak.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(handshake) // a handshake not accepted yet
		var dl net.Dialer
		return dl.DialContext(ctx, "tcp", addr)
	}
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	if !eventually(2*time.Second, func() bool { return pathOf(f, port) == PathDirect }) {
		t.Fatal("direct path never opened")
	}
	const conns = 20
	got := make(chan string, conns)
	for range conns {
		go func() { got <- readVia(t, port) }()
	}
	for range conns {
		switch path := <-got; path {
		case "direct":
			direct++
		case "tunnel": // outwaited its turn: allowed, never lost
		default:
			t.Errorf("a connection of the burst got %q, want an answer", path)
		}
	}
	if direct == 0 {
		t.Error("no connection of the burst went direct")
	}
	return peak.Load(), direct
}

func TestAddrPathOpensTheGuestsOwnAddress(t *testing.T) {
	p := AddrPath{Addr: func(context.Context) (netip.Addr, error) { return netip.MustParseAddr("192.168.64.7"), nil }}
	addr, err := p.OpenPort(context.Background(), 8080)
	if err != nil || addr != "192.168.64.7:8080" {
		t.Fatalf("OpenPort = %q, %v; want 192.168.64.7:8080", addr, err)
	}
	if p.Handshakes() < 2 {
		t.Errorf("Handshakes = %d, want many", p.Handshakes())
	}
	fail := AddrPath{Addr: func(context.Context) (netip.Addr, error) { return netip.Addr{}, errors.New("no address yet") }}
	if _, err := fail.OpenPort(context.Background(), 8080); err == nil || !strings.Contains(err.Error(), "no address yet") {
		t.Errorf("OpenPort without an address = %v, want the cause", err)
	}
}

// A direct dial that cannot get its turn in time takes the tunnel.
func TestPortForwarderTunnelsWhenTheDirectTurnTimesOut(t *testing.T) {
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, taggedServer(t, "tunnel"))
	d := &fakeDirect{to: map[int]string{port: taggedServer(t, "direct")}}
	f := newForwarder(t, g, PortForwarderConfig{Direct: d})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	if !eventually(2*time.Second, func() bool { return pathOf(f, port) == PathDirect }) {
		t.Fatal("direct path never opened")
	}
	f.directTurn <- struct{}{} // a handshake that never finishes holds the turn
	defer func() { <-f.directTurn }()
	start := time.Now()
	if got := readVia(t, port); got != "tunnel" {
		t.Errorf("connection went %q, want the tunnel after waiting for a turn", got)
	}
	if took := time.Since(start); took < directTurnWait {
		t.Errorf("fell back after %v, before the %v turn wait", took, directTurnWait)
	}
}

// When the host itself refuses the guest's address (macOS 15's Local
// Network privacy: EHOSTUNREACH or EPERM), every port moves to the tunnel
// with one warning: no connection is lost, none after the first few pays
// a failed direct dial, and the log does not grow per connection.
func TestPortForwarderLeavesADirectPathTheHostRefuses(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EHOSTUNREACH, syscall.EPERM} {
		t.Run(errno.Error(), func(t *testing.T) {
			var logs syncBuf
			g := newFakeGuest(t)
			ports := []int{freePort(t), freePort(t)}
			d := &fakeDirect{to: map[int]string{}, handshakes: 64}
			for _, p := range ports {
				g.route(p, taggedServer(t, "tunnel"))
				d.to[p] = netip.AddrPortFrom(netip.MustParseAddr("192.168.64.7"), uint16(p)).String()
			}
			f := newForwarder(t, g, PortForwarderConfig{Direct: d, Log: bufLogger(&logs)})
			var dials atomic.Int32
			f.directDial = func(_ context.Context, addr string) (net.Conn, error) {
				dials.Add(1)
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
			}
			for _, p := range ports {
				f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: p})
			}
			for _, p := range ports {
				if !eventually(2*time.Second, func() bool { return pathOf(f, p) == PathDirect }) {
					t.Fatalf("direct path of port %d never opened", p)
				}
			}
			// A burst first, then one at a time on both ports.
			const burst = 8
			got := make(chan string, burst)
			for range burst {
				go func() { got <- readVia(t, ports[0]) }()
			}
			for range burst {
				if path := <-got; path != "tunnel" {
					t.Errorf("a connection of the burst got %q, want the tunnel", path)
				}
			}
			afterBurst := dials.Load()
			for i := range 10 {
				if path := readVia(t, ports[i%2]); path != "tunnel" {
					t.Errorf("connection %d got %q, want the tunnel", i, path)
				}
			}
			if n := dials.Load(); n != afterBurst || n > burst {
				t.Errorf("%d direct dials (%d after the burst), want at most one per connection of the first burst and none later", n, afterBurst)
			}
			if n := strings.Count(logs.String(), "refuses direct connections"); n != 1 {
				t.Errorf("warned %d times, want once:\n%s", n, logs.String())
			}
			if strings.Contains(logs.String(), "direct path to the guest port failed") {
				t.Errorf("a per-connection warning was logged:\n%s", logs.String())
			}
			for _, p := range ports {
				if path := pathOf(f, p); path != PathTunnel {
					t.Errorf("port %d path = %q, want tunnel", p, path)
				}
			}
			// A port forwarded later does not try the direct path either.
			late := freePort(t)
			g.route(late, taggedServer(t, "tunnel"))
			d.mu.Lock()
			d.to[late] = "192.168.64.7:1"
			d.mu.Unlock()
			f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: late})
			if readVia(t, late) != "tunnel" || pathOf(f, late) != PathTunnel || dials.Load() != afterBurst {
				t.Errorf("a later port: path %q, %d direct dials; want the tunnel and no dial", pathOf(f, late), dials.Load()-afterBurst)
			}
		})
	}
}

// dialingDirect is a DirectPath that dials its own addresses, as an
// in-process stack does: its names mean nothing to the host's network.
type dialingDirect struct {
	fakeDirect
	realAddr string
	dialed   atomic.Int32
}

func (d *dialingDirect) DialDirect(ctx context.Context, addr string) (net.Conn, error) {
	if addr != "guest.invalid:80" {
		return nil, errors.New("unexpected address " + addr)
	}
	d.dialed.Add(1)
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", d.realAddr)
}

// A DirectPath that is a DirectDialer carries its connections itself.
func TestPortForwarderDialsThroughADirectDialer(t *testing.T) {
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, taggedServer(t, "tunnel"))
	d := &dialingDirect{fakeDirect: fakeDirect{to: map[int]string{port: "guest.invalid:80"}}, realAddr: taggedServer(t, "direct")}
	f := newForwarder(t, g, PortForwarderConfig{Direct: d})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	if !eventually(2*time.Second, func() bool { return pathOf(f, port) == PathDirect }) {
		t.Fatal("direct path never opened")
	}
	if got := readVia(t, port); got != "direct" {
		t.Errorf("connection went %q, want direct", got)
	}
	if d.dialed.Load() != 1 {
		t.Errorf("DialDirect called %d times, want 1", d.dialed.Load())
	}
}

// datagramDirect is a DirectPath that carries UDP itself, as the gvisor
// stack does: its datagram dials reach a real UDP server, tagged so the
// test sees which path a datagram took.
type datagramDirect struct {
	dialingDirect
	udpAddr   string
	udpDialed atomic.Int32
	udpFail   bool
}

func (d *datagramDirect) DialDirectUDP(ctx context.Context, addr string) (net.Conn, error) {
	if addr != "guest.invalid:80" {
		return nil, errors.New("unexpected address " + addr)
	}
	if d.udpFail {
		return nil, errors.New("stack refused")
	}
	d.udpDialed.Add(1)
	var nd net.Dialer
	return nd.DialContext(ctx, "udp", d.udpAddr)
}

// taggedUDPServer answers every datagram with tag and the datagram.
func taggedUDPServer(t *testing.T, tag string) string {
	return udpServerTagged(t, tag).LocalAddr().String()
}

// A UDP port goes direct through a DirectDatagramDialer, each peer on a
// datagram conn of its own, and status says so; when the datagram dial
// fails the peer tunnels.
func TestPortForwarderSendsUDPThroughADatagramDialer(t *testing.T) {
	for _, fail := range []bool{false, true} {
		g := newFakeGuest(t)
		port := freePort(t)
		g.route(port, taggedUDPServer(t, "tunnel"))
		d := &datagramDirect{
			dialingDirect: dialingDirect{fakeDirect: fakeDirect{to: map[int]string{port: "guest.invalid:80"}}},
			udpAddr:       taggedUDPServer(t, "direct"), udpFail: fail,
		}
		f := newForwarder(t, g, PortForwarderConfig{Direct: d})
		f.Apply(PortEvent{Added: true, Proto: "udp", IP: "0.0.0.0", Port: port})
		if !eventually(2*time.Second, func() bool { return pathOf(f, port) == PathDirect }) {
			t.Fatal("udp direct path never opened")
		}
		want, dials := "direct", 2
		if fail {
			want, dials = "tunnel", 0
		}
		for i := range 2 {
			c, err := net.Dial("udp", portAddr(port))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			msg := fmt.Sprintf("peer%d", i)
			if got := udpExchange(t, c, msg); got != want+":"+msg {
				t.Errorf("fail=%v: peer %d got %q, want %q", fail, i, got, want+":"+msg)
			}
		}
		if got := int(d.udpDialed.Load()); got != dials {
			t.Errorf("fail=%v: DialDirectUDP called %d times, want %d (one per peer)", fail, got, dials)
		}
		if got := len(g.dialLog()); got != 2-dials {
			t.Errorf("fail=%v: %d guest tunnel dials, want %d", fail, got, 2-dials)
		}
	}
}
