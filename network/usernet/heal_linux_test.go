package usernet

import (
	"context"
	"fmt"
	"github.com/miekg/dns"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Ports of the far end's echo servers, in the peer namespace.
const (
	healTCPPort = 7000
	healUDPPort = 7001
)

// The host loses its network (its address and default route gone), gets
// it back, then moves to another subnet with another DNS server: each
// time every path from the guest (DNS by name through the host's current
// resolvers, new TCP connections, and a UDP flow the guest kept open the
// whole time) answers again within 10 s, with nothing restarted. The "host"
// is this test's own network namespace; the far end is a second one
// behind a veth pair, with a real dnsmasq and echo servers on test
// addresses.
func TestNetworkHealsAfterLossAndMove(t *testing.T) {
	if !inNamespaces(t, netMountNS, "nsenter", "ip", "dnsmasq") {
		return
	}
	resolvConf := bindOver(t, t.TempDir(), "/etc/resolv.conf", "nameserver 198.18.1.1\noptions timeout:1 attempts:1\n")
	peer := newPeerNamespace(t)
	peer.ip(t, "link", "set", "lo", "up")
	mustIP(t, "link", "set", "lo", "up")
	mustIP(t, "link", "add", "vh0", "type", "veth", "peer", "name", "vp0")
	mustIP(t, "link", "set", "vp0", "netns", peer.pid())
	mustIP(t, "link", "set", "vh0", "up")
	peer.ip(t, "link", "set", "vp0", "up")
	peer.ip(t, "addr", "add", "198.18.1.1/24", "dev", "vp0")
	hostUp := func(addr, gw string) {
		mustIP(t, "addr", "add", addr, "dev", "vh0")
		mustIP(t, "route", "add", "default", "via", gw)
	}
	hostDown := func(addr string) {
		mustIP(t, "route", "del", "default")
		mustIP(t, "addr", "del", addr, "dev", "vh0")
	}
	hostUp("198.18.1.2/24", "198.18.1.1")
	peer.serveEchoes(t)
	peer.dnsmasq(t, "198.18.1.1", "198.18.1.1")

	s := newStack(t, Config{})
	guest := guestClient(t, s)
	// One guest UDP socket for the whole test: its flow's host socket
	// errors during the loss and must be replaced, not kept dead.
	flow := guestUDP(t, guest, "198.18.1.1", healUDPPort)
	paths := healPaths(guest, flow, "198.18.1.1")
	for name, ok := range paths {
		if d, err := firstSuccess(ok, 10*time.Second); err != nil {
			t.Fatalf("%s before the loss: %v", name, err)
		} else {
			t.Logf("%s answers (%s)", name, d)
		}
	}

	hostDown("198.18.1.2/24")
	for name, ok := range paths {
		if ok() == nil {
			t.Fatalf("%s still answers with the host's network gone: the test's loss is no loss", name)
		}
	}
	// The guest learns the host could not be asked, not that the name
	// does not exist: NXDOMAIN is cached as an answer, past the outage.
	if r, err := exchange(guest, GatewayIP, "svc.heal.test.", 5*time.Second); err != nil {
		t.Fatalf("a query during the loss got no answer: %v", err)
	} else if r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("a query during the loss: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	time.Sleep(2 * time.Second) // the guest keeps trying meanwhile
	for _, ok := range paths {
		_ = ok()
	}
	hostUp("198.18.1.2/24", "198.18.1.1")
	measureHeal(t, "restore", paths)

	// The move: another subnet, another DNS server, the old ones gone.
	hostDown("198.18.1.2/24")
	peer.ip(t, "addr", "add", "198.18.2.1/24", "dev", "vp0")
	peer.dnsmasq(t, "198.18.2.1", "198.18.2.1")
	peer.ip(t, "addr", "del", "198.18.1.1/24", "dev", "vp0")
	if err := os.WriteFile(resolvConf, []byte("nameserver 198.18.2.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostUp("198.18.2.2/24", "198.18.2.1")
	measureHeal(t, "move to another network", healPaths(guest, guestUDP(t, guest, "198.18.2.1", healUDPPort), "198.18.2.1"))
	if st := s.Stats(); st.Panics > 0 {
		t.Fatalf("the stack panicked %d times", st.Panics)
	}
}

// measureHeal waits for each path's first success and logs the time
// from the restore to it: the figure docs/reliability.md quotes.
func measureHeal(t *testing.T, what string, paths map[string]func() error) {
	t.Helper()
	type result struct {
		name string
		took time.Duration
		err  error
	}
	results := make(chan result, len(paths))
	for name, ok := range paths {
		go func() {
			d, err := firstSuccess(ok, 10*time.Second)
			results <- result{name, d, err}
		}()
	}
	var line []string
	for range paths {
		r := <-results
		if r.err != nil {
			t.Errorf("%s after the %s: %v", r.name, what, r.err)
			continue
		}
		line = append(line, fmt.Sprintf("%s %s", r.name, r.took.Round(time.Millisecond)))
	}
	t.Logf("network %s -> first success: %s", what, strings.Join(line, ", "))
}

func firstSuccess(ok func() error, within time.Duration) (time.Duration, error) {
	start := time.Now()
	var err error
	for time.Since(start) < within {
		if err = ok(); err == nil {
			return time.Since(start), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("no success within %s: %w", within, err)
}

// healPaths are the guest's ways out: a name looked up through the
// stack's DNS, a new TCP connection to the address it names, and a
// datagram on the long-lived flow.
func healPaths(guest *stack.Stack, flow net.Conn, far string) map[string]func() error {
	return map[string]func() error{
		"dns": func() error {
			ips, err := query(guest, GatewayIP, "svc.heal.test.", time.Second)
			if err != nil {
				return err
			}
			if len(ips) != 1 || ips[0] != far {
				return fmt.Errorf("svc.heal.test answered %v, want %s", ips, far)
			}
			return nil
		},
		"tcp": func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			c, err := dialFromGuest(ctx, guest, far, healTCPPort)
			if err != nil {
				return err
			}
			defer c.Close()
			return echoOnce(c, "tcp")
		},
		"udp": func() error { return echoOnce(flow, "udp") },
	}
}

func echoOnce(c net.Conn, msg string) error {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != msg {
		return fmt.Errorf("echo of %q came back %q", msg, buf[:n])
	}
	return nil
}

func guestUDP(t *testing.T, guest *stack.Stack, ip string, port int) net.Conn {
	t.Helper()
	raddr := tcpip.FullAddress{NIC: 1, Addr: addr4(net.ParseIP(ip)), Port: uint16(port)}
	c, err := gonet.DialUDP(guest, nil, &raddr, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// peerNamespace is a second network namespace, held by a sleeping child.
type peerNamespace struct{ cmd *exec.Cmd }

func newPeerNamespace(t *testing.T) *peerNamespace {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &peerNamespace{cmd: cmd}
	// unshare execs sleep once the namespace is made.
	deadline := time.Now().Add(5 * time.Second)
	for {
		self, _ := os.Readlink("/proc/self/ns/net")
		theirs, _ := os.Readlink(p.nsPath())
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%s/comm", p.pid())); strings.TrimSpace(string(comm)) == "sleep" && theirs != self {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer namespace never came up")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *peerNamespace) pid() string    { return fmt.Sprint(p.cmd.Process.Pid) }
func (p *peerNamespace) nsPath() string { return "/proc/" + p.pid() + "/ns/net" }

func (p *peerNamespace) ip(t *testing.T, args ...string) {
	t.Helper()
	run(t, "nsenter", append([]string{"--net=" + p.nsPath(), "ip"}, args...)...)
}

// serveEchoes starts TCP and UDP echo servers on every address of the
// peer: sockets made while this thread is in the peer's namespace stay
// in it.
func (p *peerNamespace) serveEchoes(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	err := p.inside(func() error {
		var err error
		if ln, err = net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", healTCPPort)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", healUDPPort))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	go serveUDPEcho(pc, "")
}

func (p *peerNamespace) inside(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer self.Close()
	peer, err := os.Open(p.nsPath())
	if err != nil {
		return err
	}
	defer peer.Close()
	if err := unix.Setns(int(peer.Fd()), unix.CLONE_NEWNET); err != nil {
		return err
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		panic("cannot return to the test's network namespace: " + err.Error())
	}
	return ferr
}

// dnsmasq serves svc.heal.test as answer on listen, in the peer.
func (p *peerNamespace) dnsmasq(t *testing.T, listen, answer string) {
	t.Helper()
	cmd := exec.Command("nsenter", "--net="+p.nsPath(), "dnsmasq", "--no-resolv", "--no-hosts", "--no-daemon",
		"--conf-file=/dev/null", "--port=53", "--bind-interfaces", "--listen-address="+listen, "--user=root",
		"--pid-file=", "--address=/svc.heal.test/"+answer)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

func mustIP(t *testing.T, args ...string) {
	t.Helper()
	run(t, "ip", args...)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}
