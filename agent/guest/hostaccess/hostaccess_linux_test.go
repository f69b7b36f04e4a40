package hostaccess

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent/guest/dnsforward"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func TestHostAccessRestore(t *testing.T) {
	const fresh = "*nat\n:VMDOCK-HOST - [0:0]\n" +
		"-A VMDOCK-HOST -d 10.0.0.1 -p tcp --dport 53 -j ACCEPT\n" +
		"-A VMDOCK-HOST -d 10.0.0.1 -p udp --dport 53 -j ACCEPT\n" +
		"-A VMDOCK-HOST -p tcp -d 10.0.0.1 -j REDIRECT --to-ports 4321\n" +
		"-I PREROUTING 1 -j VMDOCK-HOST\n-I OUTPUT 1 -j VMDOCK-HOST\nCOMMIT\n"
	if got := hostAccessRestore("10.0.0.1", 4321, true, "-P PREROUTING ACCEPT\n-P OUTPUT ACCEPT\n"); got != fresh {
		t.Errorf("fresh nat table:\n%s\nwant:\n%s", got, fresh)
	}
	// A second setup: the jumps are there (Docker's rules after them), so
	// only the chain is refilled.
	listing := "-P PREROUTING ACCEPT\n-N DOCKER\n-N VMDOCK-HOST\n" +
		"-A PREROUTING -j VMDOCK-HOST\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n" +
		"-A OUTPUT -j VMDOCK-HOST\n-A VMDOCK-HOST -p tcp -d 10.0.0.1 -j REDIRECT --to-ports 99\n"
	const again = "*nat\n:VMDOCK-HOST - [0:0]\n-A VMDOCK-HOST -p tcp -d 10.0.0.1 -j REDIRECT --to-ports 4321\nCOMMIT\n"
	if got := hostAccessRestore("10.0.0.1", 4321, false, listing); got != again {
		t.Errorf("jumps in place:\n%s\nwant:\n%s", got, again)
	}
	// A jump with a condition is not ours: ours is still added.
	got := hostAccessRestore("10.0.0.1", 4321, false, "-A OUTPUT -o lo -j VMDOCK-HOST\n-A PREROUTING -j VMDOCK-HOST\n")
	if want := "-I OUTPUT 1 -j VMDOCK-HOST\nCOMMIT\n"; got[len(got)-len(want):] != want {
		t.Errorf("conditional jump taken for ours:\n%s", got)
	}
}

// The DNS server's port 53 is accepted ahead of the host access REDIRECT,
// for udp and tcp, and only while the server runs; a failing iptables is
// an error.
func TestExemptDNSFromRedirect(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, s.loadHostAccessRules(context.Background(), "10.254.254.254", 4321, true))
	b, err := os.ReadFile(filepath.Join(s.Root, RulesFile))
	must(t, err)
	rules := string(b)
	redirect := strings.Index(rules, "-j REDIRECT")
	for _, want := range []string{
		"-A VMDOCK-HOST -d 10.254.254.254 -p udp --dport 53 -j ACCEPT\n",
		"-A VMDOCK-HOST -d 10.254.254.254 -p tcp --dport 53 -j ACCEPT\n",
	} {
		if i := strings.Index(rules, want); i < 0 || i > redirect {
			t.Errorf("%q missing or after the REDIRECT in:\n%s", want, rules)
		}
	}
	if !strings.Contains(fos.Ran(), "iptables-restore --noflush "+filepath.Join(s.Root, RulesFile)) {
		t.Errorf("rules not loaded:\n%s", fos.Ran())
	}
	must(t, s.loadHostAccessRules(context.Background(), "10.254.254.254", 4321, false))
	if b, _ := os.ReadFile(filepath.Join(s.Root, RulesFile)); strings.Contains(string(b), "--dport 53") {
		t.Errorf("port 53 exempted without a DNS server:\n%s", b)
	}
	for _, failing := range []string{"iptables ", "iptables-restore"} {
		fos.Results = map[string]error{failing: guestostest.ExitErr(4)}
		if err := s.loadHostAccessRules(context.Background(), "10.254.254.254", 4321, true); err == nil {
			t.Errorf("failing %s: want an error", failing)
		}
	}
}

// Setup puts the address on lo, starts the redirect target (hidden from
// the port watch) once, loads the rules and names host.docker.internal in
// /etc/hosts; a connection that did not come through the REDIRECT has no
// original destination and is closed.
func TestSetupRedirectsToTheAgent(t *testing.T) {
	s, fos := newTestServer(t)
	// Port 53 of the address is not this machine's: the DNS server fails
	// to start, which setup survives.
	s.DNS = &dnsforward.Forwarder{Sys: s.Sys}
	var hidden []int
	s.HideOwnPort = func(proto string, port int) { hidden = append(hidden, port) }
	must(t, s.Setup(context.Background(), "10.254.254.254", nil))
	defer s.Close()
	if s.IP() != "10.254.254.254" || len(hidden) != 1 {
		t.Fatalf("IP %q, hidden ports %v", s.IP(), hidden)
	}
	for _, want := range []string{"ip addr replace 10.254.254.254/32 dev lo", "iptables -t nat -S", "iptables-restore --noflush " + filepath.Join(s.Root, RulesFile)} {
		if !strings.Contains(fos.Ran(), want) {
			t.Errorf("missing command %q in:\n%s", want, fos.Ran())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(s.Root, "etc/hosts")); !strings.Contains(string(b), "10.254.254.254\thost.docker.internal\n") {
		t.Errorf("/etc/hosts = %q", b)
	}
	must(t, s.Setup(context.Background(), "10.254.254.254", nil))
	if len(hidden) != 1 {
		t.Errorf("a second setup started another listener: %v", hidden)
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(hidden[0])), 5*time.Second)
	must(t, err)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || os.IsTimeout(err) {
		t.Errorf("a connection without an original destination: read %d, %v; want it closed", n, err)
	}
	if err := s.Setup(context.Background(), "::1", nil); err == nil {
		t.Error("IPv6 address: want an error")
	}
}
