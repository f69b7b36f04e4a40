package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/connpipe"
)

// fakeGuest stands in for the guest agent: it maps "guest" ports to real
// loopback services the test started on other ports, so every tunnel is a
// real one.
type fakeGuest struct {
	t     *testing.T
	mu    sync.Mutex
	ports map[int]string // guest port -> real address
	dials []string       // "network addr" in dial order
	conns []*trackedConn
}

func newFakeGuest(t *testing.T) *fakeGuest {
	return &fakeGuest{t: t, ports: map[int]string{}}
}

func (g *fakeGuest) route(guestPort int, real string) {
	g.mu.Lock()
	g.ports[guestPort] = real
	g.mu.Unlock()
}

func (g *fakeGuest) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	g.mu.Lock()
	g.dials = append(g.dials, network+" "+addr)
	g.mu.Unlock()
	var d net.Dialer
	switch network {
	case "unix":
		c, err := d.DialContext(ctx, "unix", addr)
		if err != nil {
			return nil, err
		}
		return g.track(c), nil
	case "tcp", "udp":
		_, ps, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		port, _ := strconv.Atoi(ps)
		g.mu.Lock()
		real, ok := g.ports[port]
		g.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("connection refused: nothing on guest port %d", port)
		}
		if network == "tcp" {
			c, err := d.DialContext(ctx, "tcp", real)
			if err != nil {
				return nil, err
			}
			return g.track(c), nil
		}
		u, err := d.DialContext(ctx, "udp", real)
		if err != nil {
			return nil, err
		}
		host, guestSide := net.Pipe()
		go RelayDatagrams(guestSide, u)
		return g.track(host), nil
	}
	return nil, fmt.Errorf("unsupported network %q", network)
}

func (g *fakeGuest) track(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, closed: make(chan struct{})}
	g.mu.Lock()
	g.conns = append(g.conns, tc)
	g.mu.Unlock()
	return tc
}

func (g *fakeGuest) dialLog() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.dials...)
}

func (g *fakeGuest) tracked() []*trackedConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*trackedConn(nil), g.conns...)
}

// trackedConn reports when the forwarder closes its guest stream; it
// keeps CloseWrite visible when the wrapped conn has one.
type trackedConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(connpipe.CloseWriter); ok {
		return cw.CloseWrite()
	}
	return nil
}

// countServer reads until EOF, then replies with what it got: it only
// answers when the client's half-close made it through the tunnel.
func countServer(t *testing.T, ln net.Listener) {
	t.Helper()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, err := io.ReadAll(c)
				if err != nil {
					return
				}
				fmt.Fprintf(c, "got %d bytes: %s", len(b), b)
			}()
		}
	}()
}

func echoTCPServer(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go serveEcho(ln)
	return ln
}

// serveEcho echoes every connection on ln until ln is closed. An accept
// that fails for another reason is retried: the EMFILE test runs these
// servers in the process whose descriptors it exhausts, and a server that
// gave up there would look like a forwarder that hangs.
func serveEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		go func() { io.Copy(c, c); c.Close() }()
	}
}

func echoUDPServer(t *testing.T) net.PacketConn { return udpServerTagged(t, "echo") }

// udpServerTagged answers every datagram with tag, ':' and the datagram.
func udpServerTagged(t *testing.T, tag string) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, MaxPacket)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte(tag+":"), buf[:n]...), from)
		}
	}()
	return pc
}

// handedOut is every port freePort returned to a test still running: the
// kernel may give a closed port out again at once, and two "free" ports
// that are one made a test see one forward where it set up two.
var handedOut sync.Map

// freePort returns a port nothing listens on right now, for both tcp and
// udp on 127.0.0.1, and none it gave a test that still runs.
func freePort(t *testing.T) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if _, seen := handedOut.LoadOrStore(port, true); seen {
			continue
		}
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			pc.Close()
			t.Cleanup(func() { handedOut.Delete(port) })
			return port
		}
		handedOut.Delete(port)
	}
	t.Fatal("no free port")
	return 0
}

func portAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// eventually polls cond until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}
