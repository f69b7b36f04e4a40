package portlist

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestParseProcNet(t *testing.T) {
	const hdr = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	p := func(proto, ip string, port int) []Port {
		return []Port{{proto, netip.MustParseAddr(ip), port}}
	}
	tests := []struct {
		name, proto, line string
		want              []Port
	}{
		{"tcp listen loopback", "tcp", "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234", p("tcp", "127.0.0.1", 8080)},
		{"resolved stub 127.0.0.53 skipped", "tcp", "   3: 3500007F:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234", nil},
		{"tcp listen any", "tcp", "   1: 00000000:0016 00000000:0000 0A 0 0 0 0 0 1", p("tcp", "0.0.0.0", 22)},
		{"tcp established skipped", "tcp", "   2: 0100007F:1F90 0100007F:C350 01 0 0 0 0 0 1", nil},
		{"tcp on eth0 skipped", "tcp", "   3: 0F02000A:1F90 00000000:0000 0A 0 0 0 0 0 1", nil},
		{"tcp6 any", "tcp", "   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 0 0 0 0 0 1", p("tcp", "::", 80)},
		{"tcp6 loopback", "tcp", "   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 0 0 0 0 0 1", p("tcp", "::1", 80)},
		{"udp bound", "udp", "  10: 00000000:0035 00000000:0000 07 0 0 0 0 0 1", p("udp", "0.0.0.0", 53)},
		{"udp connected skipped", "udp", "  10: 0100007F:0035 0100007F:0035 01 0 0 0 0 0 1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcNet(strings.NewReader(hdr+tt.line+"\n"), tt.proto)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) || (len(got) == 1 && got[0] != tt.want[0]) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"0: XYZ:0050 00000000:0000 0A", "0: 0100007F:0050 00000000:0000 ZZ"} {
		if _, err := parseProcNet(strings.NewReader(hdr+bad+"\n"), "tcp"); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// TestSourcesAgree opens real sockets of every kind on this machine and
// checks that both sources list exactly the forwardable ones among them.
func TestSourcesAgree(t *testing.T) {
	if _, err := SockDiag(); err != nil {
		t.Skipf("sock_diag here: %v", err)
	}
	mine := map[Port]bool{} // ours, and whether it must be listed
	listen := func(network, addr string, want bool) net.Listener {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Skipf("listen %s %s: %v", network, addr, err)
		}
		t.Cleanup(func() { ln.Close() })
		ap := netip.MustParseAddrPort(ln.Addr().String())
		mine[Port{"tcp", ap.Addr().Unmap(), int(ap.Port())}] = want
		return ln
	}
	udp := func(addr string, want bool) *net.UDPConn {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
		if err != nil {
			t.Skipf("listen udp %s: %v", addr, err)
		}
		t.Cleanup(func() { c.Close() })
		ap := c.LocalAddr().(*net.UDPAddr).AddrPort()
		mine[Port{"udp", ap.Addr().Unmap(), int(ap.Port())}] = want
		return c
	}
	ln := listen("tcp4", "127.0.0.1:0", true)
	listen("tcp6", "[::1]:0", true)
	listen("tcp4", "127.0.0.2:0", false) // a loopback alias: private
	udp("127.0.0.1:0", true)
	// An established connection and a connected UDP socket: never listed.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, conn := range []net.Conn{c, s} {
		ap := netip.MustParseAddrPort(conn.LocalAddr().String())
		if _, ok := mine[Port{"tcp", ap.Addr(), int(ap.Port())}]; !ok {
			mine[Port{"tcp", ap.Addr(), int(ap.Port())}] = false
		}
	}
	peer := udp("127.0.0.1:0", true)
	cu, err := net.DialUDP("udp", nil, peer.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cu.Close()
	ap := cu.LocalAddr().(*net.UDPAddr).AddrPort()
	mine[Port{"udp", ap.Addr(), int(ap.Port())}] = false

	for name, list := range map[string]func() ([]Port, error){
		"SockDiag": SockDiag,
		"ProcNet":  func() ([]Port, error) { return ProcNet("/proc/net") },
	} {
		got, err := list()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		listed := map[Port]bool{}
		for _, p := range got {
			listed[p] = true
		}
		for p, want := range mine {
			if listed[p] != want {
				t.Errorf("%s: %v listed=%v, want %v", name, p, listed[p], want)
			}
		}
	}
}
