package forward

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// noIPv6Env marks the test binary re-run inside a network namespace whose
// loopback has IPv6 disabled.
const noIPv6Env = "VMDOCK_TEST_IN_NETNS_WITHOUT_IPV6"

// On a real host without IPv6 loopback the probe says so, and the
// default bind forwards on 127.0.0.1 alone: no error, no warning.
func TestPortForwarderOnAHostWithoutIPv6Loopback(t *testing.T) {
	if os.Getenv(noIPv6Env) != "1" {
		reRunWithoutIPv6(t, "TestPortForwarderOnAHostWithoutIPv6Loopback")
		return
	}
	if hostHasIPv6Loopback() {
		t.Fatal("the probe finds IPv6 loopback in a namespace whose loopback has IPv6 disabled")
	}
	srv := echoTCPServer(t)
	g := newFakeGuest(t)
	port := freePort(t)
	g.route(port, srv.Addr().String())
	f := newForwarder(t, g, PortForwarderConfig{})
	f.Apply(PortEvent{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: port})
	p := f.Ports()
	if len(p) != 1 || p[0].Error != "" || p[0].Warning != "" || !slices.Equal(p[0].HostAddrs, []string{portAddr(port)}) {
		t.Fatalf("Ports() = %+v, want %s alone, no error or warning", p, portAddr(port))
	}
	if got := echoOver(t, "tcp", portAddr(port), "hi"); got != "hi" {
		t.Errorf("echo %q", got)
	}
}

// reRunWithoutIPv6 runs this test binary's test name again in a new
// network namespace (root, unshare and ip needed, else it skips) with
// IPv6 off on its loopback.
func reRunWithoutIPv6(t *testing.T, name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	script := `ip link set lo up && echo 1 > /proc/sys/net/ipv6/conf/lo/disable_ipv6 && exec "$0" -test.run="^$1\$" -test.v`
	cmd := exec.Command("unshare", "-n", "sh", "-c", script, os.Args[0], name)
	cmd.Env = append(os.Environ(), noIPv6Env+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a namespace without IPv6: %v\n%s", err, out)
	}
	t.Logf("in a namespace without IPv6:\n%s", out)
}
