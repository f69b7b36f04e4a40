package usernet

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// A lookup storm, 500 lookups from 50 concurrent guest clients, each on a
// flow of its own, leaves no host sockets behind within 10 s: neither
// through the stack's DNS (the guest's resolver) nor relayed to another
// resolver on the host, which is what piled up thousands of sockets in
// other user-mode stacks.
//
// It owns the host's resolver as TestDNSFollowsHostResolver does, so the
// stack's lookups go to a dnsmasq on loopback and nowhere else.
func TestLookupStormLeavesNoSocketsBehind(t *testing.T) {
	if !inNamespaces(t, mountNS, "dnsmasq") {
		return
	}
	dir := t.TempDir()
	bindOver(t, dir, "/etc/resolv.conf", "nameserver 127.0.0.202\noptions timeout:1 attempts:1\n")
	bindOver(t, dir, "/etc/hosts", "127.0.0.1 localhost\n")
	startDnsmasq(t, "127.0.0.202", "10.1.2.3")
	resolver := udpEchoServer(t)
	port := uint16(loopbackPort(t, resolver.LocalAddr()))
	old := requestResponsePorts
	requestResponsePorts = map[uint16]bool{port: true}
	t.Cleanup(func() { requestResponsePorts = old })
	// The default idle time, far above 10 s: only the request/response
	// rule can end the relayed flows in time.
	guest := guestClient(t, newStack(t, Config{UDPIdle: time.Minute}))
	idle := openFDs(t)

	var viaDNS, relayed atomic.Int32
	start := time.Now()
	storm(t, func() error {
		ips, err := query(guest, GatewayIP, "svc.corp.test.", 5*time.Second)
		if err == nil && (len(ips) != 1 || ips[0] != "10.1.2.3") {
			err = fmt.Errorf("answer %v, want 10.1.2.3", ips)
		}
		return err
	}, &viaDNS)
	t.Logf("through the stack's DNS: %d of 500 answered in %v", viaDNS.Load(), time.Since(start))
	start = time.Now()
	storm(t, func() error { return udpRoundTrip(guest, port) }, &relayed)
	t.Logf("relayed: %d of 500 answered in %v", relayed.Load(), time.Since(start))
	if viaDNS.Load() != 500 || relayed.Load() != 500 {
		t.Errorf("lookups answered: %d of 500 through the stack's DNS, %d of 500 relayed", viaDNS.Load(), relayed.Load())
	}
	after := openFDs(t)
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t) > idle+2 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the storm: %d fds open, %d before it (%d right after)", openFDs(t), idle, after)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("fds: %d idle, %d right after the storm, back to %d", idle, after, openFDs(t))
}

// storm runs lookup 500 times, 50 at a time, counting the answers.
func storm(t *testing.T, lookup func() error, answered *atomic.Int32) {
	t.Helper()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if err := lookup(); err == nil {
					answered.Add(1)
				}
			}
		}()
	}
	wg.Wait()
}

// udpRoundTrip sends one datagram from a new guest port to the host's
// loopback port (through the gateway address) and waits for the echo.
func udpRoundTrip(guest *stack.Stack, port uint16) error {
	raddr := tcpip.FullAddress{NIC: 1, Addr: addr4(net.ParseIP(GatewayIP)), Port: port}
	conn, err := gonet.DialUDP(guest, nil, &raddr, ipv4.ProtocolNumber)
	if err != nil {
		return fmt.Errorf("dial: %s", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("lookup")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "lookup" {
		return fmt.Errorf("echo %q", buf[:n])
	}
	return nil
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func udpEchoServer(t *testing.T) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go serveUDPEcho(pc, "")
	return pc
}
