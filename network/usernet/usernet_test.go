package usernet

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

func newStack(t *testing.T, cfg Config) *Stack {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func dialFromGuest(ctx context.Context, st *stack.Stack, ip string, port int) (net.Conn, error) {
	full := tcpip.FullAddress{NIC: 1, Addr: addr4(net.ParseIP(ip)), Port: uint16(port)}
	return gonet.DialContextTCP(ctx, st, full, ipv4.ProtocolNumber)
}

func loopbackPort(t *testing.T, addr net.Addr) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(addr.String())
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The guest downloads from an HTTP server on the host's loopback through
// the gateway address, as it would from slirp's 10.0.2.2.
func TestGuestDownloadsFromHostLoopback(t *testing.T) {
	body := make([]byte, 4<<20)
	rand.Read(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer srv.Close()
	port := loopbackPort(t, srv.Listener.Addr())

	guest := guestClient(t, newStack(t, Config{}))
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialFromGuest(ctx, guest, GatewayIP, port)
	}}, Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + net.JoinHostPort(GatewayIP, strconv.Itoa(port)) + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("downloaded %d bytes, not the %d the server sent", len(got), len(body))
	}
}

// Isolated: the same host server is out of the guest's reach.
func TestIsolatedRelaysNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	guest := guestClient(t, newStack(t, Config{Isolated: true}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := dialFromGuest(ctx, guest, GatewayIP, loopbackPort(t, ln.Addr())); err == nil {
		c.Close()
		t.Fatal("an isolated guest reached the host's loopback")
	}
}

// A published port's direct path: the host dials the guest's listener
// through the stack, and bytes echo back.
func TestDirectPathEchoesThroughStack(t *testing.T) {
	s := newStack(t, Config{})
	guest := guestClient(t, s)
	ln, err := gonet.ListenTCP(guest, tcpip.FullAddress{NIC: 1, Port: 8080}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	d := s.Direct()
	addr, err := d.OpenPort(context.Background(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.DialDirect(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := make([]byte, 256<<10)
	rand.Read(msg)
	go c.Write(msg)
	got := make([]byte, len(msg))
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echo differs from what was sent")
	}
	if _, err := d.OpenPort(context.Background(), 70000); err == nil {
		t.Fatal("port 70000 accepted")
	}
}

// A host peer's datagrams reach a UDP server on the guest's address
// through the stack, and its replies come back on the same conn.
func TestDirectPathCarriesUDP(t *testing.T) {
	s := newStack(t, Config{})
	guest := guestClient(t, s)
	srv, err := gonet.DialUDP(guest, &tcpip.FullAddress{NIC: 1, Port: 5353}, nil, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go serveUDPEcho(srv, "guest:")
	d := s.Direct()
	addr, err := d.OpenPort(context.Background(), 5353)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.DialDirectUDP(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2048)
	for i := range 3 {
		msg := "ping" + strconv.Itoa(i)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("reply to %s: %v", msg, err)
		}
		if got := string(buf[:n]); got != "guest:"+msg {
			t.Fatalf("reply %q, want %q", got, "guest:"+msg)
		}
	}
	if _, err := d.DialDirectUDP(context.Background(), "[::1]:53"); err == nil {
		t.Fatal("an IPv6 address accepted")
	}
}

// A guest UDP flow reaches a host loopback echo server; once idle longer
// than UDPIdle its host socket is gone, so the next datagram of the same
// guest flow comes from a new host port.
func TestUDPFlowRelaysAndExpires(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	sources := make(chan string, 8)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			sources <- from.String()
			pc.WriteTo(buf[:n], from)
		}
	}()
	guest := guestClient(t, newStack(t, Config{UDPIdle: 300 * time.Millisecond}))
	raddr := tcpip.FullAddress{NIC: 1, Addr: addr4(net.ParseIP(GatewayIP)), Port: uint16(loopbackPort(t, pc.LocalAddr()))}
	conn, err := gonet.DialUDP(guest, nil, &raddr, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	echo := func(msg string) string {
		t.Helper()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		if err != nil || string(buf[:n]) != msg {
			t.Fatalf("echo of %q: %q, %v", msg, buf[:n], err)
		}
		return <-sources
	}
	first := echo("one")
	if again := echo("two"); again != first {
		t.Fatalf("a live flow changed host socket: %s then %s", first, again)
	}
	time.Sleep(time.Second)
	if after := echo("three"); after == first {
		t.Fatalf("the idle flow kept its host socket %s", first)
	}
}

// The guest's DHCP (the image's eth0 asks for it) leases slirp's
// addressing to the guest's MAC: 10.0.2.15/24, router and DNS 10.0.2.2.
func TestDHCPLeasesTheGuestSlirpAddressing(t *testing.T) {
	guest := guestClient(t, newStack(t, Config{Isolated: true}))
	laddr := tcpip.FullAddress{NIC: 1, Addr: addr4(net.ParseIP(GuestIP)), Port: 68}
	raddr := tcpip.FullAddress{NIC: 1, Addr: addr4(net.ParseIP(GatewayIP)), Port: 67}
	conn, err := gonet.DialUDP(guest, &laddr, &raddr, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mac, _ := net.ParseMAC(GuestMAC)
	discover, err := dhcpv4.NewDiscovery(mac)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(discover.ToBytes()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	offer, err := dhcpv4.FromBytes(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	if got := offer.YourIPAddr.String(); got != GuestIP {
		t.Errorf("leased %s, want %s", got, GuestIP)
	}
	if got := net.IP(offer.SubnetMask()).String(); got != "255.255.255.0" {
		t.Errorf("mask %s, want 255.255.255.0", got)
	}
	if r := offer.Router(); len(r) != 1 || r[0].String() != GatewayIP {
		t.Errorf("router %v, want %s", r, GatewayIP)
	}
	if d := offer.DNS(); len(d) != 1 || d[0].String() != GatewayIP {
		t.Errorf("DNS %v, want %s", d, GatewayIP)
	}
}

// serveUDPEcho answers every datagram on pc with prefix and the datagram
// until pc is closed.
func serveUDPEcho(pc net.PacketConn, prefix string) {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		pc.WriteTo(append([]byte(prefix), buf[:n]...), from)
	}
}
