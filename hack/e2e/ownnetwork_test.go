//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A lane that runs its instance in the default network mode (not
// isolated) runs in network and mount namespaces of its own, so the VM
// still reaches nothing but what the test put there: the namespace's
// loopback and a test network (corpIP, on one end of a veth pair, 198.18.0.0/15
// as RFC 2544 sets aside for tests). The host's resolver is the test's own:
// /etc/resolv.conf names a dnsmasq on a loopback address that answers the
// test's names, the way a laptop's VPN or company resolver answers names
// no public resolver knows.

// ownNetworkEnv marks the test binary run again inside its namespaces.
const ownNetworkEnv = "VMDOCK_E2E_OWN_NETWORK"

const (
	// hostResolverIP is where the namespace's /etc/resolv.conf points: the
	// dnsmasq only the host knows.
	hostResolverIP = "127.0.0.2"
	// corpIP is the test network's server address, in the namespace.
	corpIP = "198.18.0.1"
	// corpName and corpRegistryName only the host's resolver answers, both
	// with corpIP.
	corpName         = "svc.corp.test"
	corpRegistryName = "registry.corp.test"
)

// ownNetwork is the namespaces' network as the test set it up.
type ownNetwork struct {
	dir         string
	resolverLog string // dnsmasq's query log
}

// inOwnNetwork runs the calling test again in new network and mount
// namespaces and reports its result; it returns true only in that inner
// run, where the test goes on.
func inOwnNetwork(t *testing.T) bool {
	if os.Getenv(ownNetworkEnv) == "1" {
		return true
	}
	for _, bin := range []string{"unshare", "ip", "dnsmasq", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s missing: run hack/deps.sh (%v)", bin, err)
		}
	}
	args := []string{"--net", "--mount", "--propagation", "private", os.Args[0], "-test.run", "^" + t.Name() + "$", "-test.v"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout", time.Until(d).Round(time.Second).String())
	}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), ownNetworkEnv+"=1")
	var out strings.Builder
	// Streamed as it comes: CI shows the steps of a long test as they run.
	cmd.Stdout = io.MultiWriter(os.Stdout, &out)
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s in its own network namespace: %v", t.Name(), err)
	}
	if strings.Contains(out.String(), "--- SKIP: "+t.Name()) {
		t.Fatalf("%s skipped inside its namespace", t.Name())
	}
	return false
}

// setUpOwnNetwork brings the namespace's loopback and test network up and
// starts the host's resolver; t's cleanup ends it.
func setUpOwnNetwork(t *testing.T, base string) *ownNetwork {
	t.Helper()
	n := &ownNetwork{dir: filepath.Join(base, "own network")}
	must(t, os.MkdirAll(n.dir, 0o755))
	for _, c := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		// A veth pair, not a dummy interface: the test machines' kernels
		// may lack the dummy driver and load no modules.
		{"ip", "link", "add", "corp0", "type", "veth", "peer", "name", "corp1"},
		{"ip", "addr", "add", corpIP + "/24", "dev", "corp0"},
		{"ip", "link", "set", "corp0", "up"},
		{"ip", "link", "set", "corp1", "up"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	resolv := filepath.Join(n.dir, "resolv.conf")
	writeFile(t, resolv, []byte("nameserver "+hostResolverIP+"\noptions timeout:1 attempts:2\n"))
	// Bound in this private mount namespace only; the file may be a link.
	if out, err := exec.Command("mount", "--bind", resolv, "/etc/resolv.conf").CombinedOutput(); err != nil {
		t.Fatalf("bind the test's resolv.conf over /etc/resolv.conf: %v\n%s", err, out)
	}
	n.resolverLog = filepath.Join(n.dir, "dnsmasq.log")
	startDaemon(t, filepath.Join(n.dir, "dnsmasq.out"), "dnsmasq", "--no-resolv", "--no-hosts", "--no-daemon",
		"--conf-file=/dev/null", "--port=53", "--bind-interfaces", "--listen-address="+hostResolverIP, "--user=root",
		"--log-queries", "--log-facility="+n.resolverLog,
		"--address=/"+corpName+"/"+corpIP, "--address=/"+corpRegistryName+"/"+corpIP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command("getent", "hosts", corpName).Output()
		if err == nil && strings.HasPrefix(string(out), corpIP) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the namespace's resolver does not answer %s: %v %q", corpName, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// queried says whether the host's resolver was asked for name.
func (n *ownNetwork) queried(t *testing.T, name string) bool {
	t.Helper()
	b, err := os.ReadFile(n.resolverLog)
	if err != nil {
		t.Fatalf("dnsmasq's log: %v", err)
	}
	return strings.Contains(string(b), fmt.Sprintf("query[A] %s ", name))
}

// corpRegistryPort is the registry's port on corpIP, in the lane's own
// network namespace (no other test sees it).
const corpRegistryPort = 5000

// startCorpRegistry runs a TLS registry on the test network, named
// corpRegistryName, with a CA of its own; the returned PEM file is what
// the instance's caCerts must hold.
func (n *ownNetwork) startCorpRegistry(t *testing.T) string {
	t.Helper()
	ca, err := newTestCA("vmdock e2e company CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(n.dir, "company-ca.pem")
	writeFile(t, caFile, ca.certPEM)
	startRegistryOn(t, n.dir, "company-registry", ca, corpIP, corpRegistryPort, corpRegistryName)
	return caFile
}

// checkOutsideNames: in the default network mode, names only the host's
// resolver knows resolve in the guest, in a container and for a docker
// push and pull by name, each asked of the host's resolver; status shows
// where the guest's DNS goes.
func checkOutsideNames(t *testing.T, e *env, n *ownNetwork) {
	e.timed("outside names resolve through the host's resolver: guest, container, docker push and pull", func(t *testing.T) {
		var st struct {
			HostAgent struct {
				GuestDNS *struct{ Upstreams []string } `json:"guestDns"`
			} `json:"hostAgent"`
		}
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v", err)
		}
		if d := st.HostAgent.GuestDNS; d == nil || len(d.Upstreams) == 0 {
			t.Errorf("hostAgent.guestDns = %+v: want the guest's upstreams", d)
		} else {
			t.Logf("the guest's DNS upstreams: %v", d.Upstreams)
		}
		if out := e.run(time.Minute, e.vmdock, "ssh", "--", "getent", "hosts", corpName); !strings.HasPrefix(out, corpIP) {
			t.Errorf("the guest's getent hosts %s: %q, want %s", corpName, out, corpIP)
		}
		out = e.docker(2*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "nslookup", corpName)
		if !strings.Contains(out, corpIP) {
			t.Errorf("a container's nslookup %s:\n%s\nwant %s", corpName, out, corpIP)
		}
		if !n.queried(t, corpName) {
			t.Errorf("the host's resolver was never asked for %s", corpName)
		}
		ref := fmt.Sprintf("%s:%d/e2e/names:1", corpRegistryName, corpRegistryPort)
		e.docker(time.Minute, "tag", "vmdock-test:latest", ref)
		e.docker(3*time.Minute, "push", ref)
		e.docker(time.Minute, "rmi", ref)
		e.docker(3*time.Minute, "pull", ref)
		e.docker(time.Minute, "rmi", ref)
		if !n.queried(t, corpRegistryName) {
			t.Errorf("the host's resolver was never asked for %s", corpRegistryName)
		}
	})
}
