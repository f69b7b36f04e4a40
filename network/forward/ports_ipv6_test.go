package forward

import (
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func v6Addr(port int) string { return net.JoinHostPort("::1", strconv.Itoa(port)) }

func needIPv6Loopback(t *testing.T) {
	t.Helper()
	if !hostHasIPv6Loopback() {
		t.Skip("this host cannot listen on [::1]")
	}
}

func TestListenHosts(t *testing.T) {
	tests := []struct {
		bind string
		v6   bool
		want []string
	}{
		{"127.0.0.1", true, []string{"127.0.0.1", "::1"}},
		{"127.0.0.1", false, []string{"127.0.0.1"}},
		// IPv4 loopback always exists: a ::1 bind also takes it.
		{"::1", true, []string{"::1", "127.0.0.1"}},
		{"::1", false, []string{"::1", "127.0.0.1"}},
		{"0.0.0.0", true, []string{"0.0.0.0"}},
		{"::", true, []string{"::"}},
		{"192.168.1.10", true, []string{"192.168.1.10"}},
		{"127.0.0.2", true, []string{"127.0.0.2"}},
		{"::ffff:127.0.0.1", true, []string{"::ffff:127.0.0.1"}},
		{"garbage", true, []string{"garbage"}},
	}
	for _, tt := range tests {
		probed := false
		got := listenHosts(tt.bind, func() bool { probed = true; return tt.v6 })
		if !slices.Equal(got, tt.want) {
			t.Errorf("listenHosts(%q, v6=%v) = %q, want %q", tt.bind, tt.v6, got, tt.want)
		}
		if probed && tt.bind != "127.0.0.1" {
			t.Errorf("listenHosts(%q) probed IPv6 loopback; only a 127.0.0.1 bind needs to", tt.bind)
		}
	}
}

func echoOver(t *testing.T, network, addr, msg string) string {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatalf("dial %s %s: %v", network, addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if network == "udp" {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("reply over %s %s: %v", network, addr, err)
		}
		return string(buf[:n])
	}
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reply over %s %s: %v", network, addr, err)
	}
	return string(b)
}

func TestPortForwarderServesBothLoopbackFamilies(t *testing.T) {
	needIPv6Loopback(t)
	for _, proto := range []string{"tcp", "udp"} {
		t.Run(proto, func(t *testing.T) {
			g := newFakeGuest(t)
			port := freePort(t)
			want := "hi"
			if proto == "tcp" {
				g.route(port, echoTCPServer(t).Addr().String())
			} else {
				g.route(port, echoUDPServer(t).LocalAddr().String())
				want = "echo:hi"
			}
			f := newForwarder(t, g, PortForwarderConfig{})
			f.Apply(PortEvent{Added: true, Proto: proto, IP: "0.0.0.0", Port: port})
			for _, addr := range []string{portAddr(port), v6Addr(port)} {
				if got := echoOver(t, proto, addr, "hi"); got != want {
					t.Errorf("%s %s answered %q, want %q", proto, addr, got, want)
				}
			}
			p := f.Ports()
			if len(p) != 1 || p[0].HostAddr != portAddr(port) || p[0].Error != "" || p[0].Warning != "" ||
				!slices.Equal(p[0].HostAddrs, []string{portAddr(port), v6Addr(port)}) {
				t.Fatalf("Ports() = %+v, want %s served on both loopbacks", p, portAddr(port))
			}
			f.Apply(PortEvent{Added: false, Proto: proto, IP: "0.0.0.0", Port: port})
			if !eventually(2*time.Second, func() bool { return tryBindAt(proto, v6Addr(port)) == nil }) {
				t.Fatalf("%s still taken after the guest port went away", v6Addr(port))
			}
		})
	}
}

func tryBindAt(proto, addr string) error {
	if proto == "udp" {
		pc, err := net.ListenPacket("udp", addr)
		if err == nil {
			pc.Close()
		}
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
	}
	return err
}

// A port another program holds on one loopback family is still served on
// the other, and Ports says which address is missing and why.
func TestPortForwarderOneFamilyTakenServesTheOther(t *testing.T) {
	needIPv6Loopback(t)
	for _, tc := range []struct {
		name        string
		proto       string
		taken, free func(int) string
	}{
		{"tcp v4 taken", "tcp", portAddr, v6Addr},
		{"tcp v6 taken", "tcp", v6Addr, portAddr},
		{"udp v4 taken", "udp", portAddr, v6Addr},
		{"udp v6 taken", "udp", v6Addr, portAddr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFakeGuest(t)
			port := freePort(t)
			want := "hi"
			if tc.proto == "tcp" {
				busy, err := net.Listen("tcp", tc.taken(port))
				if err != nil {
					t.Fatal(err)
				}
				defer busy.Close()
				g.route(port, echoTCPServer(t).Addr().String())
			} else {
				busy, err := net.ListenPacket("udp", tc.taken(port))
				if err != nil {
					t.Fatal(err)
				}
				defer busy.Close()
				g.route(port, echoUDPServer(t).LocalAddr().String())
				want = "echo:hi"
			}
			f := newForwarder(t, g, PortForwarderConfig{})
			f.Apply(PortEvent{Added: true, Proto: tc.proto, IP: "0.0.0.0", Port: port})
			p := f.Ports()
			if len(p) != 1 || p[0].Error != "" || !slices.Equal(p[0].HostAddrs, []string{tc.free(port)}) {
				t.Fatalf("Ports() = %+v, want served on %s only, no error", p, tc.free(port))
			}
			if w := p[0].Warning; !strings.Contains(w, tc.taken(port)) || !strings.Contains(w, "already in use") || strings.Contains(w, "\n") {
				t.Errorf("warning %q, want one line naming %s as in use", w, tc.taken(port))
			}
			if got := echoOver(t, tc.proto, tc.free(port), "hi"); got != want {
				t.Errorf("%s answered %q, want %q", tc.free(port), got, want)
			}
		})
	}
}

// recordListens makes f's listens succeed on a loopback port of their own
// and returns the addresses asked for.
func recordListens(t *testing.T, f *PortForwarder) func() []string {
	var mu sync.Mutex
	var asked []string
	f.listenTCP = func(addr string) (net.Listener, error) {
		mu.Lock()
		asked = append(asked, addr)
		mu.Unlock()
		return net.Listen("tcp", "127.0.0.1:0")
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
}

func TestPortForwarderNonLoopbackBindListensOnce(t *testing.T) {
	for _, bind := range []string{"0.0.0.0", "::", "192.168.1.10", "127.0.0.2"} {
		t.Run(bind, func(t *testing.T) {
			f := newForwarder(t, newFakeGuest(t), PortForwarderConfig{BindAddr: bind})
			asked := recordListens(t, f)
			f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: 18080})
			want := net.JoinHostPort(bind, "18080")
			if got := asked(); !slices.Equal(got, []string{want}) {
				t.Errorf("listened on %q, want only %s", got, want)
			}
			if p := f.Ports(); len(p) != 1 || !slices.Equal(p[0].HostAddrs, []string{want}) || p[0].Warning != "" {
				t.Errorf("Ports() = %+v", p)
			}
		})
	}
}

func TestPortForwarderWithoutIPv6LoopbackListensIPv4Only(t *testing.T) {
	f := newForwarder(t, newFakeGuest(t), PortForwarderConfig{})
	f.hosts = listenHosts("127.0.0.1", func() bool { return false }) // what NewPortForwarder gets on such a host
	asked := recordListens(t, f)
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: 18080})
	if got := asked(); !slices.Equal(got, []string{"127.0.0.1:18080"}) {
		t.Errorf("listened on %q, want 127.0.0.1:18080 only", got)
	}
	if p := f.Ports(); len(p) != 1 || p[0].Error != "" || p[0].Warning != "" {
		t.Errorf("Ports() = %+v, want no error and no warning", p)
	}
}

// A ::1 bind on a host whose IPv6 is off still serves 127.0.0.1.
func TestPortForwarderIPv6BindFallsBackToIPv4(t *testing.T) {
	f := newForwarder(t, newFakeGuest(t), PortForwarderConfig{BindAddr: "::1"})
	real := f.listenTCP
	f.listenTCP = func(addr string) (net.Listener, error) {
		if strings.HasPrefix(addr, "[::1]") {
			return nil, &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EADDRNOTAVAIL)}
		}
		return real(addr)
	}
	port := freePort(t)
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	p := f.Ports()
	if len(p) != 1 || p[0].HostAddr != v6Addr(port) || p[0].Error != "" || !slices.Equal(p[0].HostAddrs, []string{portAddr(port)}) ||
		!strings.Contains(p[0].Warning, v6Addr(port)) {
		t.Fatalf("Ports() = %+v, want %s served on %s with a warning about %s", p, v6Addr(port), portAddr(port), v6Addr(port))
	}
}

func TestPortForwarderBothFamiliesFailingIsOneError(t *testing.T) {
	f := newForwarder(t, newFakeGuest(t), PortForwarderConfig{})
	f.hosts = []string{"127.0.0.1", "::1"}
	f.listenTCP = func(addr string) (net.Listener, error) {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	}
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: 18080})
	p := f.Ports()
	if len(p) != 1 || len(p[0].HostAddrs) != 0 || p[0].Warning != "" {
		t.Fatalf("Ports() = %+v, want an unserved port", p)
	}
	e := p[0].Error
	if !strings.Contains(e, "127.0.0.1:18080") || !strings.Contains(e, "[::1]:18080") || strings.Contains(e, "\n") {
		t.Errorf("error %q, want one line naming both addresses", e)
	}
}
