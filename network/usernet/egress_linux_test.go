package usernet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/vmdock/vmdock/network/egress"
)

// A sandbox's guest reaches the one allowed name, through the stack's DNS
// and the address it answered, and nothing else: a name not allowed is
// REFUSED by the DNS, a connection to another server (whose address the
// guest knows without asking) is reset at once, a port the rule does not
// name too, and a UDP query straight to the host's resolver fails at once
// (ICMP port unreachable); each refusal is in the log with its
// destination. A real dnsmasq answers both names and two HTTP servers
// listen, all on test addresses in the test's own namespaces.
func TestSandboxEgressAllowlist(t *testing.T) {
	if !inNamespaces(t, netMountNS, "ip", "dnsmasq") {
		return
	}
	testAddresses(t, "198.18.0.1", "198.18.0.2", "198.18.0.53")
	dir := t.TempDir()
	bindOver(t, dir, "/etc/resolv.conf", "nameserver 198.18.0.53\noptions timeout:1 attempts:1\n")
	bindOver(t, dir, "/etc/hosts", "127.0.0.1 localhost\n")
	startDnsmasqAnswering(t, "198.18.0.53", "/allowed.test/198.18.0.1", "/blocked.test/198.18.0.2")
	serveHTTP(t, "198.18.0.1:80", "allowed server")
	serveHTTP(t, "198.18.0.2:80", "blocked server")
	serveHTTP(t, "198.18.0.1:81", "allowed host, other port")

	logPath := filepath.Join(dir, "egress.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	policy, err := egress.New([]string{"allowed.test:80"}, logFile)
	if err != nil {
		t.Fatal(err)
	}
	guest := guestClient(t, newStack(t, Config{Egress: policy}))

	if got, err := query(guest, DNSIP, "allowed.test.", 5*time.Second); err != nil || len(got) != 1 || got[0] != "198.18.0.1" {
		t.Fatalf("allowed.test from the guest: %v, %v; want 198.18.0.1", got, err)
	}
	if body, err := httpGetFromGuest(guest, "198.18.0.1:80"); err != nil || body != "allowed server" {
		t.Fatalf("GET the allowed server: %q, %v", body, err)
	}
	if r, err := exchange(guest, GatewayIP, "blocked.test.", 5*time.Second); err != nil || r.Rcode != dns.RcodeRefused || len(r.Answer) > 0 {
		t.Fatalf("blocked.test from the guest: %v, %v; want REFUSED, no answer", r, err)
	}
	for _, dst := range []string{"198.18.0.2:80", "198.18.0.1:81", "10.0.2.2:80"} {
		if body, err := httpGetFromGuest(guest, dst); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("GET %s from the guest: %q, %v; want the connection refused at once", dst, body, err)
		}
	}
	if err := portUnreachableFromGuest(guest, "198.18.0.53:53"); err != nil {
		t.Errorf("a query straight to the host's resolver: %v; want refused at once", err)
	}
	logged, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"refused dns blocked.test\n", "refused tcp 198.18.0.2:80\n", "refused tcp 198.18.0.1:81\n", "refused udp 198.18.0.53:53\n"} {
		if !strings.Contains(string(logged), want) {
			t.Errorf("the refusal log lacks %q:\n%s", want, logged)
		}
	}
}

func startDnsmasqAnswering(t *testing.T, listen string, addresses ...string) {
	t.Helper()
	args := []string{"--no-resolv", "--no-hosts", "--no-daemon", "--conf-file=/dev/null",
		"--port=53", "--bind-interfaces", "--listen-address=" + listen, "--user=root"}
	for _, a := range addresses {
		args = append(args, "--address="+a)
	}
	cmd := exec.Command("dnsmasq", args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dns.Client{Timeout: 200 * time.Millisecond}
		if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("allowed.test.", dns.TypeA), net.JoinHostPort(listen, "53")); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq on %s never answered", listen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func serveHTTP(t *testing.T, addr, body string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func httpGetFromGuest(guest *stack.Stack, addr string) (string, error) {
	client := http.Client{Timeout: 8 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, a string) (net.Conn, error) {
			host, port, _ := net.SplitHostPort(a)
			var p int
			p, _ = strconv.Atoi(port)
			return dialFromGuest(ctx, guest, host, p)
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// portUnreachableFromGuest sends a DNS query to addr (ip:port, anywhere)
// from the guest and waits for the ICMP port unreachable that refuses it
// (gonet's UDP conn does not surface ICMP errors, so the guest stack's
// counter is the witness).
func portUnreachableFromGuest(guest *stack.Stack, addr string) error {
	ap, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return err
	}
	raddr := tcpip.FullAddress{NIC: 1, Addr: addr4(ap.IP), Port: uint16(ap.Port)}
	conn, tcpErr := gonet.DialUDP(guest, nil, &raddr, ipv4.ProtocolNumber)
	if tcpErr != nil {
		return tcpErr
	}
	defer conn.Close()
	counter := guest.Stats().ICMP.V4.PacketsReceived.DstUnreachable
	before := counter.Value()
	q, err := new(dns.Msg).SetQuestion("allowed.test.", dns.TypeA).Pack()
	if err != nil {
		return err
	}
	if _, err := conn.Write(q); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for counter.Value() == before {
		if time.Now().After(deadline) {
			return errors.New("no ICMP destination unreachable came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
