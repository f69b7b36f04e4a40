package usernet

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// Past the cap of UDP flows, a new flow ends the one idle the longest and
// only that one: its next datagram comes from a new host socket while the
// busier flows keep theirs. The stats count the flows and the eviction,
// and the cap is logged once although it bites twice.
func TestUDPFlowCapEvictsTheOldestIdle(t *testing.T) {
	echo, sources := udpSourceEcho(t)
	var log lockedBuffer
	s := newStack(t, Config{Limits: Limits{UDPFlows: 3}, Log: slog.New(slog.NewTextHandler(&log, nil))})
	guest := guestClient(t, s)
	raddr := tcpip.FullAddress{NIC: 1, Addr: addr4(net.ParseIP(GatewayIP)), Port: uint16(loopbackPort(t, echo.LocalAddr()))}
	flows := make([]net.Conn, 4)
	hostPort := make([]string, 4)
	for i := range flows {
		c, err := gonet.DialUDP(guest, nil, &raddr, ipv4.ProtocolNumber)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		flows[i] = c
	}
	for i := range 3 {
		hostPort[i] = udpEcho(t, flows[i], sources, "first")
		time.Sleep(20 * time.Millisecond)
	}
	udpEcho(t, flows[0], sources, "again") // flow 1 is now the one idle the longest
	if st := s.Stats(); st.UDPFlows != 3 || st.UDPEvicted != 0 {
		t.Fatalf("stats at the cap: %d flows, %d evicted; want 3, 0", st.UDPFlows, st.UDPEvicted)
	}
	udpEcho(t, flows[3], sources, "fourth")
	if st := s.Stats(); st.UDPFlows != 3 || st.UDPEvicted != 1 {
		t.Fatalf("stats past the cap: %d flows, %d evicted; want 3, 1", st.UDPFlows, st.UDPEvicted)
	}
	if got := udpEcho(t, flows[0], sources, "still"); got != hostPort[0] {
		t.Errorf("the busiest flow lost its host socket %s (now %s)", hostPort[0], got)
	}
	if got := udpEcho(t, flows[1], sources, "back"); got == hostPort[1] {
		t.Errorf("the flow idle the longest kept its host socket %s", got)
	}
	if n := strings.Count(log.String(), "cap of relayed UDP flows"); n != 1 {
		t.Errorf("the cap logged %d times, want once:\n%s", n, log.String())
	}
}

// Past the cap of TCP relays the guest's connection is reset; once one
// relay ends a new connection gets through again.
func TestTCPRelayCapResetsPastIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
	var log lockedBuffer
	s := newStack(t, Config{Limits: Limits{TCPRelays: 2}, Log: slog.New(slog.NewTextHandler(&log, nil))})
	guest := guestClient(t, s)
	port := loopbackPort(t, ln.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var open []net.Conn
	for range 2 {
		c, err := dialFromGuest(ctx, guest, GatewayIP, port)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tcpEcho(t, c)
		open = append(open, c)
	}
	for range 2 {
		if c, err := dialFromGuest(ctx, guest, GatewayIP, port); err == nil {
			c.Close()
			t.Fatal("a third relay got through a cap of 2")
		}
	}
	if st := s.Stats(); st.TCPRelays != 2 || st.TCPRefused != 2 {
		t.Fatalf("stats at the cap: %d relays, %d refused; want 2, 2", st.TCPRelays, st.TCPRefused)
	}
	open[0].Close()
	waitFor(t, "the closed relay to end", func() bool { return s.Stats().TCPRelays == 1 })
	c, err := dialFromGuest(ctx, guest, GatewayIP, port)
	if err != nil {
		t.Fatalf("a relay after one ended: %v", err)
	}
	defer c.Close()
	tcpEcho(t, c)
	if n := strings.Count(log.String(), "cap of relayed TCP connections"); n != 1 {
		t.Errorf("the cap logged %d times, want once:\n%s", n, log.String())
	}
}

// udpSourceEcho is a loopback UDP echo server that reports each
// datagram's source address.
func udpSourceEcho(t *testing.T) (net.PacketConn, chan string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	sources := make(chan string, 64)
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
	return pc, sources
}

// udpEcho sends msg on c, waits for its echo and returns the host source
// the echo server saw.
func udpEcho(t *testing.T, c net.Conn, sources chan string, msg string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != msg {
		t.Fatalf("echo of %q: %q, %v", msg, buf[:n], err)
	}
	return <-sources
}

func tcpEcho(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
