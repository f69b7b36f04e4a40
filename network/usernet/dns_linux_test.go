package usernet

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// The guest's DNS goes through the host's resolver as configured when the
// query arrives: the test owns /etc/resolv.conf and /etc/hosts (bound over
// the real ones in a private mount namespace), whose first nameserver is
// dead and second a dnsmasq; switching the file to another dnsmasq shows
// in the guest's answers, hosts entries resolve, and isolated refuses.
func TestDNSFollowsHostResolver(t *testing.T) {
	if !inNamespaces(t, mountNS, "dnsmasq") {
		return
	}
	dir := t.TempDir()
	resolvConf := bindOver(t, dir, "/etc/resolv.conf", "nameserver 127.0.0.201\nnameserver 127.0.0.202\noptions timeout:1 attempts:1\n")
	bindOver(t, dir, "/etc/hosts", "127.0.0.1 localhost\n10.9.8.7 fromhosts.corp.test\n")
	startDnsmasq(t, "127.0.0.202", "10.1.2.3")
	startDnsmasq(t, "127.0.0.203", "10.4.5.6")

	guest := guestClient(t, newStack(t, Config{}))
	waitForAnswer(t, guest, GatewayIP, "svc.corp.test.", "10.1.2.3", 10*time.Second)
	waitForAnswer(t, guest, DNSIP, "fromhosts.corp.test.", "10.9.8.7", 10*time.Second)

	// Written in place: the bind mount holds the file, not its name.
	if err := os.WriteFile(resolvConf, []byte("nameserver 127.0.0.201\nnameserver 127.0.0.203\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitForAnswer(t, guest, GatewayIP, "svc.corp.test.", "10.4.5.6", 10*time.Second)

	isolated := guestClient(t, newStack(t, Config{Isolated: true}))
	if r, err := exchange(isolated, GatewayIP, "svc.corp.test.", 2*time.Second); err != nil || r.Rcode != dns.RcodeRefused || len(r.Answer) > 0 {
		t.Fatalf("isolated guest's query: %v, %v; want REFUSED, no answer", r, err)
	}
}

// An isolated stack refuses the guest's queries on both DNS addresses
// rather than dropping them: a dropped query held every lookup (a proxied
// docker pull's too) for the resolver's whole timeout.
func TestIsolatedRefusesDNS(t *testing.T) {
	guest := guestClient(t, newStack(t, Config{Isolated: true}))
	for _, server := range []string{GatewayIP, DNSIP} {
		r, err := exchange(guest, server, "example.com.", 5*time.Second)
		if err != nil {
			t.Fatalf("query to %s: %v; want a REFUSED answer", server, err)
		}
		if r.Rcode != dns.RcodeRefused || len(r.Answer) > 0 || !r.Response {
			t.Fatalf("query to %s answered %s with %d records; want REFUSED and none", server, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
	}
}

func bindOver(t *testing.T, dir, target, content string) string {
	t.Helper()
	src := filepath.Join(dir, filepath.Base(target))
	if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s over %s: %v", src, target, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(target, 0) })
	return src
}

func startDnsmasq(t *testing.T, listen, answer string) {
	t.Helper()
	cmd := exec.Command("dnsmasq", "--no-resolv", "--no-hosts", "--no-daemon", "--conf-file=/dev/null",
		"--port=53", "--bind-interfaces", "--listen-address="+listen, "--user=root",
		"--address=/svc.corp.test/"+answer)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dns.Client{Timeout: 200 * time.Millisecond}
		m := new(dns.Msg).SetQuestion("svc.corp.test.", dns.TypeA)
		if _, _, err := c.Exchange(m, net.JoinHostPort(listen, "53")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq on %s never answered", listen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitForAnswer(t *testing.T, guest *stack.Stack, server, name, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var got []string
	var err error
	for time.Now().Before(deadline) {
		got, err = query(guest, server, name, 2*time.Second)
		if err == nil && len(got) == 1 && got[0] == want {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s from the guest via %s: got %v (err %v) for %s, want %s", name, server, got, err, within, want)
}

// query asks server for name's A records from inside the guest.
func query(guest *stack.Stack, server, name string, timeout time.Duration) ([]string, error) {
	r, err := exchange(guest, server, name, timeout)
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, a := range r.Answer {
		if rec, ok := a.(*dns.A); ok {
			ips = append(ips, rec.A.String())
		}
	}
	return ips, nil
}

func exchange(guest *stack.Stack, server, name string, timeout time.Duration) (*dns.Msg, error) {
	raddr := tcpip.FullAddress{NIC: 1, Addr: addr4(net.ParseIP(server)), Port: 53}
	conn, err := gonet.DialUDP(guest, nil, &raddr, ipv4.ProtocolNumber)
	if err != nil {
		return nil, errors.New(err.Error())
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := dns.Client{Timeout: timeout}
	m := new(dns.Msg).SetQuestion(name, dns.TypeA)
	r, _, err := c.ExchangeWithConnContext(ctx, m, &dns.Conn{Conn: conn})
	return r, err
}
