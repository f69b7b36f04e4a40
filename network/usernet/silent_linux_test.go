package usernet

import (
	"context"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A guest with a host that drops its SYNs, hammered with 300 connections
// (more than the stack's whole table of pending connections), still
// reaches another destination at once: the silent one holds at most its
// own share of pending dials. Before, its dials filled every slot for 30 s
// and every other new connection of the VM waited that long.
//
// It runs in a network namespace of its own, where both destinations are
// test addresses (198.18.0.1 drops SYNs, 198.18.0.2 accepts) on its
// loopback interface, so the guest dials them as it would any address out there.
func TestSilentDestinationLeavesOthersReachable(t *testing.T) {
	if !inNamespaces(t, netNS, "ip") {
		return
	}
	testAddresses(t, "198.18.0.1", "198.18.0.2")
	silent := fullBacklogListener(t, [4]byte{198, 18, 0, 1})
	good, err := net.Listen("tcp", "198.18.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	go acceptAndHold(good)
	guest := guestClient(t, newStack(t, Config{}))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, err := dialFromGuest(ctx, guest, "198.18.0.1", silent); err == nil {
				c.Close()
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for guest.Stats().TCP.ActiveConnectionOpenings.Value() < 300 {
		if time.Now().After(deadline) {
			t.Fatalf("the guest opened only %d connections", guest.Stats().TCP.ActiveConnectionOpenings.Value())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the stack takes in the SYNs

	dctx, dcancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer dcancel()
	c, err := dialFromGuest(dctx, guest, "198.18.0.2", loopbackPort(t, good.Addr()))
	if err != nil {
		t.Fatalf("a second destination while one drops SYNs: %v", err)
	}
	c.Close()
}

// fullBacklogListener is a loopback listener whose accept queue is full
// and never drained: the kernel drops further SYNs to it, as a firewall
// that drops them does. It returns its port.
func fullBacklogListener(t *testing.T, ip [4]byte) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: ip}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	addr := net.JoinHostPort(net.IP(ip[:]).String(), strconv.Itoa(port))
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err != nil {
			return port // the queue is full: this SYN went unanswered
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatalf("the listener on %s kept accepting with a backlog of 0", addr)
	return 0
}

func acceptAndHold(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() { io.Copy(c, c); c.Close() }()
	}
}

// testAddresses brings up the loopback interface of the test's own
// network namespace with addrs on it.
func testAddresses(t *testing.T, addrs ...string) {
	t.Helper()
	cmds := [][]string{{"link", "set", "lo", "up"}}
	for _, a := range addrs {
		cmds = append(cmds, []string{"addr", "add", a + "/32", "dev", "lo"})
	}
	for _, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}
