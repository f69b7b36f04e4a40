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
// loopback and, through a veth pair, a second namespace (corpNS) on test
// addresses (198.18.0.0/15, as RFC 2544 sets aside for tests) that holds
// the lane's "outside": the host's resolver (a dnsmasq that answers names
// no public resolver knows, as a company resolver or a VPN's does), a web
// server and a registry. The lane's default route leads there, so taking
// the route and address away is the laptop losing its network, and
// moving to the second subnet, with its own resolver, is the laptop
// roaming to another network.

// ownNetworkEnv marks the test binary run again inside its namespaces.
const ownNetworkEnv = "VMDOCK_E2E_OWN_NETWORK"

// corpNS is the outside's namespace. Its name is the machine's, not the
// lane's (ip netns adds a file under /run/netns), and two lanes in their
// own networks may run at once (.ci/run's resume and sandbox lanes), so
// each run names its own.
var corpNS = fmt.Sprintf("vmdock-e2e-corp-%d", os.Getpid())

const (
	// corpIP is the outside's address on the first subnet, where it also
	// answers DNS; hostIP is the lane's own address there.
	corpIP = "198.18.0.1"
	hostIP = "198.18.0.2"
	// corpIP2 and hostIP2 are the same on the second subnet, whose
	// resolver answers the same names with corpIP2.
	corpIP2 = "198.19.0.1"
	hostIP2 = "198.19.0.2"
	// corpName and corpRegistryName only the host's resolver answers.
	corpName         = "svc.corp.test"
	corpRegistryName = "registry.corp.test"
	// sandboxAPIName is a sandbox's secret's host (sandbox_linux_test.go
	// serves HTTPS for it on corpIP).
	sandboxAPIName = "api.corp.test"
	// corpWebPort serves corpWebBody on both subnets.
	corpWebPort = 8080
	corpWebBody = "corp-web-ok"
)

// ownNetwork is the namespaces' network as the test set it up.
type ownNetwork struct {
	dir         string
	resolvConf  string // bound over /etc/resolv.conf: written in place to move
	resolverLog string // the first subnet's dnsmasq's query log
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

// setUpOwnNetwork brings the lane's loopback and its link to the outside
// up, and starts the outside's resolvers and web server; t's cleanup ends
// them.
func setUpOwnNetwork(t *testing.T, base string) *ownNetwork {
	t.Helper()
	n := &ownNetwork{dir: filepath.Join(base, "own network")}
	must(t, os.MkdirAll(n.dir, 0o755))
	ipRun(t,
		[]string{"link", "set", "lo", "up"},
		[]string{"netns", "add", corpNS},
		// A veth pair, not a dummy interface: the test machines' kernels
		// may lack the dummy driver and load no modules.
		[]string{"link", "add", "corp0", "type", "veth", "peer", "name", "corp1", "netns", corpNS},
		[]string{"-n", corpNS, "link", "set", "lo", "up"},
		[]string{"-n", corpNS, "addr", "add", corpIP + "/24", "dev", "corp1"},
		[]string{"-n", corpNS, "addr", "add", corpIP2 + "/24", "dev", "corp1"},
		[]string{"-n", corpNS, "link", "set", "corp1", "up"},
		[]string{"link", "set", "corp0", "up"},
	)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", corpNS).Run() })
	n.join(t, hostIP, corpIP)
	n.resolvConf = filepath.Join(n.dir, "resolv.conf")
	writeFile(t, n.resolvConf, []byte("nameserver "+corpIP+"\noptions timeout:1 attempts:2\n"))
	// Bound in this private mount namespace only; the file may be a link.
	if out, err := exec.Command("mount", "--bind", n.resolvConf, "/etc/resolv.conf").CombinedOutput(); err != nil {
		t.Fatalf("bind the test's resolv.conf over /etc/resolv.conf: %v\n%s", err, out)
	}
	n.resolverLog = filepath.Join(n.dir, "dnsmasq.log")
	n.startResolver(t, corpIP, n.resolverLog)
	n.startResolver(t, corpIP2, filepath.Join(n.dir, "dnsmasq2.log"))
	web := filepath.Join(n.dir, "web")
	must(t, os.MkdirAll(web, 0o755))
	writeFile(t, filepath.Join(web, "index.html"), []byte(corpWebBody+"\n"))
	startDaemon(t, filepath.Join(n.dir, "httpd.out"), "ip", "netns", "exec", corpNS,
		"/bin/busybox", "httpd", "-f", "-p", fmt.Sprintf("0.0.0.0:%d", corpWebPort), "-h", web)
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

// startResolver runs a dnsmasq in the outside on ip, answering the test's
// names with ip.
func (n *ownNetwork) startResolver(t *testing.T, ip, logf string) {
	t.Helper()
	startDaemon(t, logf+".out", "ip", "netns", "exec", corpNS, "dnsmasq", "--no-resolv", "--no-hosts", "--no-daemon",
		"--conf-file=/dev/null", "--port=53", "--bind-interfaces", "--listen-address="+ip, "--user=root",
		"--log-queries", "--log-facility="+logf,
		"--address=/"+corpName+"/"+ip, "--address=/"+corpRegistryName+"/"+ip, "--address=/"+sandboxAPIName+"/"+ip)
}

// join gives the lane addr on the link and its default route via gw.
func (n *ownNetwork) join(t *testing.T, addr, gw string) {
	t.Helper()
	ipRun(t, []string{"addr", "add", addr + "/24", "dev", "corp0"}, []string{"route", "add", "default", "via", gw})
}

// leave takes the lane's address on the link away, and its routes with it.
func (n *ownNetwork) leave(t *testing.T, addr string) {
	t.Helper()
	ipRun(t, []string{"addr", "del", addr + "/24", "dev", "corp0"})
}

// useResolver points the host's resolv.conf at ip, written in place: the
// bind mount holds the file, not its name.
func (n *ownNetwork) useResolver(t *testing.T, ip string) {
	t.Helper()
	writeFile(t, n.resolvConf, []byte("nameserver "+ip+"\noptions timeout:1 attempts:2\n"))
}

func ipRun(t *testing.T, cmds ...[]string) {
	t.Helper()
	for _, c := range cmds {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(c, " "), err, out)
		}
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
	startRegistryOn(t, corpNS, n.dir, "company-registry", ca, corpIP, corpRegistryPort, corpRegistryName)
	return caFile
}

// checkOutsideNames: in the default network mode, names only the host's
// resolver knows resolve in the guest, in a container and for a docker
// push and pull by name, each asked of the host's resolver; status shows
// where the guest's DNS goes.
func checkOutsideNames(t *testing.T, e *env, n *ownNetwork) {
	e.timed("outside names resolve through the host's resolver: guest, container, docker push and pull", func(t *testing.T) {
		// Status reports the host agent's last answer from the guest,
		// asked again in the background every few seconds.
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(time.Second) {
			var st struct {
				HostAgent struct {
					GuestDNS *struct{ Upstreams []string } `json:"guestDns"`
				} `json:"hostAgent"`
			}
			out := e.run(time.Minute, e.vmdock, "status", "--json")
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("status --json: %v", err)
			}
			if d := st.HostAgent.GuestDNS; d != nil && len(d.Upstreams) > 0 {
				t.Logf("the guest's DNS upstreams: %v", d.Upstreams)
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("hostAgent.guestDns = %+v: want the guest's upstreams", st.HostAgent.GuestDNS)
				break
			}
		}
		var out string
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
