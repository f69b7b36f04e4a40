package forward

import (
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A host listener whose socket fails under the forwarder (shut down by
// someone else: accept then fails for good) or is closed under it is
// bound again by Heal on the same address, on both loopbacks; before,
// the port stayed dead for the rest of the run while Ports still listed
// it. Heal with nothing failed does nothing.
func TestHealBindsAgainListenersThatStopped(t *testing.T) {
	if !hostHasIPv6Loopback() {
		t.Skip("needs IPv6 loopback")
	}
	tcpSrv, udpSrv := echoTCPServer(t), echoUDPServer(t)
	g := newFakeGuest(t)
	port, udpPort := freePort(t), freePort(t)
	g.route(port, tcpSrv.Addr().String())
	g.route(udpPort, udpSrv.LocalAddr().String())
	f := newForwarder(t, g, PortForwarderConfig{})
	var mu sync.Mutex
	tcpLns := map[string]net.Listener{}
	udpPCs := map[string]net.PacketConn{}
	f.listenTCP = func(addr string) (net.Listener, error) {
		ln, err := net.Listen("tcp", addr)
		mu.Lock()
		tcpLns[addr] = ln
		mu.Unlock()
		return ln, err
	}
	f.listenUDP = func(addr string) (net.PacketConn, error) {
		pc, err := net.ListenPacket("udp", addr)
		mu.Lock()
		udpPCs[addr] = pc
		mu.Unlock()
		return pc, err
	}
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	f.Apply(PortEvent{Added: true, Proto: "udp", IP: "0.0.0.0", Port: udpPort})
	if r, d := f.Heal(); r != nil || d != nil {
		t.Fatalf("Heal with nothing failed: %v, %v", r, d)
	}
	v4, v6 := portAddr(port), net.JoinHostPort("::1", strconv.Itoa(port))
	udp6 := net.JoinHostPort("::1", strconv.Itoa(udpPort))

	mu.Lock()
	shutDown(t, tcpLns[v4])
	shutDown(t, tcpLns[v6])
	udpPCs[udp6].Close()
	mu.Unlock()
	if !eventually(2*time.Second, func() bool { _, err := net.DialTimeout("tcp", v4, time.Second); return err != nil }) {
		t.Fatal("the shut-down listener still accepts: the test broke nothing")
	}
	// The accept loops end a moment after the shutdown; the watchdog's
	// next look finds the rest.
	var repaired []Repair
	var down []string
	eventually(2*time.Second, func() bool {
		r, d := f.Heal()
		repaired, down = append(repaired, r...), d
		return len(repaired) >= 3
	})
	if len(repaired) != 3 || len(down) != 0 {
		t.Fatalf("Heal repaired %v (still down %v); want tcp on both loopbacks and udp on ::1", repaired, down)
	}
	for _, addr := range []string{v4, v6} {
		if got := echoOver(t, "tcp", addr, "hi"); got != "hi" {
			t.Errorf("tcp %s after Heal echoed %q", addr, got)
		}
	}
	if got := echoOver(t, "udp", udp6, "hi"); got != "echo:hi" {
		t.Errorf("udp %s after Heal answered %q", udp6, got)
	}
	for _, p := range f.Ports() {
		if p.Error != "" || p.Warning != "" || len(p.HostAddrs) != 2 || p.HostAddrs[0] != p.HostAddr {
			t.Errorf("after Heal: %+v", p)
		}
	}
	if r, d := f.Heal(); r != nil || d != nil {
		t.Fatalf("a second Heal: %v, %v", r, d)
	}
}

// shutDown shuts ln's socket down under the forwarder: its accept fails
// with EINVAL from then on, as after a socket reset by someone else.
func shutDown(t *testing.T, ln net.Listener) {
	t.Helper()
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	raw.Control(func(fd uintptr) {
		if err := syscall.Shutdown(int(fd), syscall.SHUT_RDWR); err != nil {
			t.Fatal(err)
		}
	})
}
