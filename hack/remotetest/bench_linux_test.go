package remotetest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/bench"
)

// The remote bench runs `vmdock bench --sections remote` against a remote
// instance on the same real parts as TestRemoteInstanceWithRealServer:
// Debian's openssh-server and docker.io's dockerd in a network namespace
// of their own (the server, 198.18.0.2), the command line in another (the
// laptop). It measures, so it runs only when asked: `make bench-remote`,
// or `make bench`'s remote step, sets remoteBenchEnv.
const (
	remoteBenchEnv     = "VMDOCK_REMOTE_BENCH"
	remoteBenchInNSEnv = "VMDOCK_REMOTE_BENCH_IN_NS"
	// remoteBenchOutEnv names a folder for the run's table (remote.txt),
	// and a bench.json the rows are added to (--append).
	remoteBenchOutEnv = "VMDOCK_REMOTE_BENCH_OUT"
)

func TestRemoteBench(t *testing.T) {
	if os.Getenv(remoteBenchEnv) == "" {
		t.Skipf("a measurement, not a test: `make bench-remote` runs it (%s=1)", remoteBenchEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces, sshd and dockerd need root")
	}
	for _, tool := range []string{"unshare", "nsenter", "ip", "ssh", "ssh-keygen", "/usr/sbin/sshd", "docker", "/bin/busybox"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install openssh-server openssh-client busybox-static; hack/deps.sh)", tool)
		}
	}
	if os.Getenv(remoteBenchInNSEnv) == "" {
		cmd := exec.Command("unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" -test.run="^$1\$" -test.v -test.timeout=30m`, os.Args[0], t.Name())
		cmd.Env = append(os.Environ(), remoteBenchInNSEnv+"=1")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		return
	}
	s := startRemoteServer(t)
	vmdock := buildVmdock(t, s.dir)
	home := filepath.Join(s.dir, "vmdock-home")
	t.Setenv("VMDOCK_HOME", home)
	t.Setenv("DOCKER_CONFIG", filepath.Join(s.dir, "docker-config"))
	t.Setenv("DOCKER_HOST", "")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "template.yaml"), fmt.Sprintf("remote:\n  url: ssh://placeholder\n  socket: %s\n  hostPorts: []\n", s.engineSocket))
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(vmdock, append([]string{"-p", "remote"}, args...)...).CombinedOutput()
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(home, "remote", "hostagent.log"))
			t.Fatalf("vmdock %s: %v\n%s\nhost agent log:\n%s\n%s", strings.Join(args, " "), err, out, tail(string(b)), s.logs())
		}
		return string(out)
	}
	cli("start", "--remote", "ssh://root@"+remoteServerAddr+":22")
	defer exec.Command(vmdock, "-p", "remote", "stop").Run()
	args := []string{"bench", "--quick", "--sections", bench.SectionRemote, "--busybox", "/bin/busybox", "--json", filepath.Join(s.dir, "remote.json")}
	out := os.Getenv(remoteBenchOutEnv)
	if out != "" {
		args = append(args, "--append", filepath.Join(out, "bench.json"))
	}
	// The table alone (stdout), without the progress lines.
	var stderr strings.Builder
	bcmd := exec.Command(vmdock, append([]string{"-p", "remote"}, args...)...)
	bcmd.Stderr = &stderr
	b, err := bcmd.Output()
	if err != nil {
		t.Fatalf("vmdock %s: %v\n%s%s\n%s", strings.Join(args, " "), err, b, stderr.String(), s.logs())
	}
	table := string(b)
	t.Logf("vmdock %s:\n%s", strings.Join(args, " "), table)
	if out != "" {
		writeFile(t, filepath.Join(out, "remote.txt"), table)
	}
	checkRemoteBench(t, filepath.Join(s.dir, "remote.json"))
}

// checkRemoteBench checks the report has every row of the remote section,
// its baseline first, and skipped nothing; no figure is judged.
func checkRemoteBench(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Machine.Remote == "" || rep.Machine.GuestCPUs == 0 {
		t.Errorf("machine %+v; want the remote URL and the server's CPUs", rep.Machine)
	}
	if len(rep.Skipped) != 0 {
		t.Errorf("skipped %q", rep.Skipped)
	}
	rows := map[string][]string{}
	var metrics []string
	for _, r := range rep.Results {
		if r.Section != bench.SectionRemote || r.Value <= 0 {
			t.Errorf("row %+v", r)
		}
		if _, ok := rows[r.Metric]; !ok {
			metrics = append(metrics, r.Metric)
		}
		rows[r.Metric] = append(rows[r.Metric], r.Variant)
	}
	api := "OpenSSH forward (ssh -L), vmdock session"
	ports := "server address, no ssh, OpenSSH forward (ssh -L), vmdock session (localhost)"
	want := map[string]string{
		"docker GET /_ping p50": api, "docker GET /_ping p90": api, "docker GET /version p50": api, "docker GET /version p90": api,
		"docker GET /_ping, new connection each p50": api, "docker GET /_ping, new connection each p90": api,
		"published port download 64MB": ports, "published port connect+first byte p50": ports, "published port connect+first byte p90": ports,
	}
	for m, v := range want {
		if got := strings.Join(rows[m], ", "); got != v {
			t.Errorf("%s: variants %q; want %q", m, got, v)
		}
	}
	if len(metrics) != len(want) {
		t.Errorf("metrics %q; want the %d of the remote section", metrics, len(want))
	}
}
