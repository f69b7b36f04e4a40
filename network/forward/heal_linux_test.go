package forward

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// inHealNetnsEnv marks the test binary re-run in a network namespace of
// its own, where it may take addresses away.
const inHealNetnsEnv = "VMDOCK_TEST_HEAL_NETNS"

// A port published while its bind address is away (the network it
// belongs to gone) listens once the address is back and the watchdog
// heals; before, the port stayed an error for the rest of the run. An
// address that vanishes and comes back under a listener leaves it
// serving.
func TestHealBindsWhenTheAddressComesBack(t *testing.T) {
	if os.Getenv(inHealNetnsEnv) != "1" {
		reRunInNetns(t)
		return
	}
	ipCmd(t, "link", "set", "lo", "up")
	srv := echoTCPServer(t)
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, srv.Addr().String())
	f := newForwarder(t, g, PortForwarderConfig{BindAddr: "198.18.0.9"})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	addr := net.JoinHostPort("198.18.0.9", strconv.Itoa(port))
	if p := f.Ports(); len(p) != 1 || !strings.Contains(p[0].Error, "cannot assign requested address") {
		t.Fatalf("with the address away: %+v; want the listen error", p)
	}
	if r, d := f.Heal(); len(r) != 0 || len(d) != 1 || d[0] != addr {
		t.Fatalf("Heal with the address away: repaired %v, down %v; want %s down", r, d, addr)
	}
	ipCmd(t, "addr", "add", "198.18.0.9/32", "dev", "lo")
	if r, d := f.Heal(); len(r) != 1 || r[0].Addr != addr || len(d) != 0 {
		t.Fatalf("Heal with the address back: repaired %v, down %v", r, d)
	}
	if got := echoOver(t, "tcp", addr, "hi"); got != "hi" {
		t.Fatalf("echo over %s: %q", addr, got)
	}
	ipCmd(t, "addr", "del", "198.18.0.9/32", "dev", "lo")
	time.Sleep(100 * time.Millisecond)
	ipCmd(t, "addr", "add", "198.18.0.9/32", "dev", "lo")
	f.Heal()
	if got := echoOver(t, "tcp", addr, "again"); got != "again" {
		t.Fatalf("echo over %s after the address came back: %q", addr, got)
	}
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func reRunInNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	cmd := exec.Command("unshare", "-n", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), inHealNetnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("in a network namespace: %v\n%s", err, out)
	}
	t.Logf("in a network namespace:\n%s", out)
}
