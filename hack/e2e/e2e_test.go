//go:build e2e

// Package e2e boots one real vmdock instance under QEMU (TCG on machines
// without KVM) and runs every end-to-end check against it. It is gated by
// the e2e build tag and VMDOCK_E2E=1; `make e2e` and .ci/run run it.
//
// Network safety: the instance runs with --network-mode isolated (the
// default gvisor stack relaying nothing; QEMU user networking with
// restrict=on in the arm64 lane, which keeps slirp), every image comes from a
// tarball built here, and host-access checks only listen on this machine's
// loopback, but for the isolation check's listener on its own address.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/shortdir"
)

type timing struct {
	name string
	d    time.Duration
}

// env is the one booted instance every check shares.
type env struct {
	t         *testing.T
	repo      string
	vmdock    string
	home      string // VMDOCK_HOME
	dockerCfg string // DOCKER_CONFIG
	work      string
	testTar   string
	timings   []timing
	// reliability rows, printed as the README's table
	reliability []reliabilityRow
	// extraEnv goes after the inherited environment (the last value of a
	// name wins).
	extraEnv []string
	// boots counts the VM boots the test ran, for .ci/run's table.
	boots bootCount
}

// bootCount is how many times a test booted a VM: cold, or resumed from a
// saved state. Starts may run at once (one lock, two contenders).
type bootCount struct {
	mu            sync.Mutex
	cold, resumed int
}

func (b *bootCount) add(resumed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if resumed {
		b.resumed++
	} else {
		b.cold++
	}
}

// line is what .ci/run reads for its table's boots column; keep its form.
func (b *bootCount) line() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("e2e boots: cold=%d resumed=%d", b.cold, b.resumed)
}

// countBoot counts a start or restart that succeeded and booted the VM
// (a start of a running or starting instance only says so, or follows the
// boot another start counts). The start's progress says when it resumed;
// a resume the VMM refused goes on "booting cold" after it.
func (e *env) countBoot(name string, args []string, out string, err error) {
	if err != nil || name != e.vmdock || len(args) == 0 || (args[0] != "start" && args[0] != "restart") {
		return
	}
	if strings.Contains(out, "is already running") || strings.Contains(out, "is already starting") {
		return
	}
	e.boots.add(strings.Contains(out, "resuming the VM saved") && !strings.Contains(out, "booting cold"))
}

func (e *env) environ() []string {
	return append(append(os.Environ(),
		"VMDOCK_HOME="+e.home,
		"DOCKER_CONFIG="+e.dockerCfg,
		"VMDOCK_PROFILE=",
		"DOCKER_HOST=", "DOCKER_CONTEXT=",
	), e.extraEnv...)
}

// run runs a command with the instance's environment and fails the test on
// error, returning stdout.
func (e *env) run(timeout time.Duration, name string, args ...string) string {
	e.t.Helper()
	out, errOut, err := e.try(timeout, name, args...)
	if err != nil {
		e.t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s%s", name, strings.Join(args, " "), err, out, errOut, e.failedStartLogs(name, args))
	}
	return out
}

// failedStartLogs is the end of the instance's logs when a start failed:
// CI keeps only the test's output, and the reason a boot failed (a
// session that ended, a guest error) is in them, not in start's message.
func (e *env) failedStartLogs(name string, args []string) string {
	if name != e.vmdock || len(args) == 0 || args[0] != "start" {
		return ""
	}
	var b strings.Builder
	dir := filepath.Join(e.home, "default")
	for _, f := range []string{"hostagent.log", "guestagent.log", "serial.log"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		lines = lines[max(0, len(lines)-40):]
		fmt.Fprintf(&b, "\n--- last %d lines of %s ---\n%s", len(lines), f, strings.Join(lines, "\n"))
	}
	return b.String()
}

func (e *env) try(timeout time.Duration, name string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = e.environ()
	cmd.Dir = e.work
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	e.countBoot(name, args, out.String(), err)
	return out.String(), errOut.String(), err
}

func (e *env) docker(timeout time.Duration, args ...string) string {
	e.t.Helper()
	return e.run(timeout, "docker", append([]string{"--context", "vmdock"}, args...)...)
}

// timed runs f as a named check and records how long it took.
func (e *env) timed(name string, f func(t *testing.T)) {
	start := time.Now()
	ok := e.t.Run(name, f)
	e.timings = append(e.timings, timing{name, time.Since(start)})
	if !ok {
		e.t.FailNow()
	}
}

func (e *env) printTimings() {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-80s %8s\n", "e2e step", "seconds")
	var total time.Duration
	for _, tm := range e.timings {
		fmt.Fprintf(&b, "%-80s %8.1f\n", tm.name, tm.d.Seconds())
		total += tm.d
	}
	fmt.Fprintf(&b, "%-80s %8.1f\n", "total", total.Seconds())
	fmt.Fprintf(&b, "\n%s\n", e.boots.line())
	fmt.Print(b.String())
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func processesMatching(substr string) []string {
	out, _ := exec.Command("ps", "-eo", "pid=,args=").Output()
	var found []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, substr) && !strings.Contains(line, "ps -eo") {
			found = append(found, strings.TrimSpace(line))
		}
	}
	sort.Strings(found)
	return found
}

func TestE2E(t *testing.T) {
	if os.Getenv("VMDOCK_E2E") != "1" {
		t.Skip("set VMDOCK_E2E=1 to boot a real VM")
	}
	e, base := newEnv(t, "amd64")
	defer e.printReliability()
	defer e.printTimings()

	share9p := filepath.Join(base, "share 9p")
	shareVFS := filepath.Join(base, "share virtiofs")
	syncDir := filepath.Join(base, "sync app")
	for _, d := range []string{share9p, shareVFS, syncDir} {
		os.MkdirAll(d, 0o755)
	}
	if err := os.WriteFile(filepath.Join(syncDir, "seed.txt"), []byte("seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgYAML := fmt.Sprintf(`mountType: 9p
mounts:
  - location: %q
    writable: true
    type: 9p
    exclude: [node_modules]
  - location: %q
    writable: true
    type: virtiofs
  - location: %q
    writable: true
  - location: %q
    writable: true
    mode: sync
    exclude: [node_modules]
`, share9p, shareVFS, e.work, syncDir)
	corp := startCorpNet(t, base) // registries and proxy on loopback (corpnet_test.go)
	cfgYAML += corp.configYAML()
	domainPorts := pickDomainPorts(t)
	cfgYAML += domainPorts.configYAML()
	e.configure(cfgYAML)

	// A context of the user's own is current before start; stop must
	// bring it back and leave its files alone.
	e.run(time.Minute, "docker", "context", "create", "dummy", "--docker", "host=unix:///nonexistent/docker.sock")
	e.run(time.Minute, "docker", "context", "use", "dummy")
	dummyBefore := snapshotContexts(t, e.dockerCfg)

	// The first run of a fresh install: no checkout, no local build; the
	// image comes from published files, served here on loopback.
	e.outsideCheckout(t, base)
	release := e.serveRelease(t)
	checkPinnedBuildRefusesAnotherManifest(t, e, release, base)
	startArgs := []string{"start", "--cpus", "2", "--memory", "2", "--network-mode", "isolated"}
	e.timed("boot with a panicking kernel fails naming the panic", func(t *testing.T) {
		checkBootPanic(t, e, startArgs)
	})
	sshAgent := startHostSSHAgent(e)
	e.timed("vmdock start (cold boot)", func(t *testing.T) {
		corp.useStartEnv(e)
		e.run(15*time.Minute, e.vmdock, startArgs...)
	})
	e.timed("the default image was downloaded from the release manifest", func(t *testing.T) {
		checkDefaultImageFrom(t, e, "amd64", release.URL+"vmdock-amd64.tar.zst")
		// The server cut the first download half way; the first start
		// (the panicking kernel's) resumed it from there by itself.
		if r := release.rangesOf("/vmdock-amd64.tar.zst"); len(r) != 2 || r[0] != "" || !strings.HasPrefix(r[1], "bytes=") || r[1] == "bytes=0-" {
			t.Errorf("the image's GETs had the Range headers %q; want the whole file once, cut, then one resume from where it stopped", r)
		}
	})
	e.timed("status --json says Running", func(t *testing.T) {
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if !strings.Contains(out, "Running") {
			t.Fatalf("status: %s", out)
		}
		checkBootReport(t, out)
	})
	checkShareTypes(t, e, []share{{share9p, share9p, "9p"}, {shareVFS, shareVFS, "virtiofs"}, {e.work, e.work, "9p"}})
	e.timed("docker info shows the guest kernel", func(t *testing.T) {
		out := e.docker(2*time.Minute, "info", "--format", "{{.KernelVersion}} {{.OperatingSystem}}")
		if !strings.Contains(out, "Debian") {
			t.Fatalf("docker info: %q", out)
		}
		host, _ := exec.Command("uname", "-r").Output()
		if strings.TrimSpace(out) == strings.TrimSpace(string(host)) {
			t.Fatalf("docker info reports the host kernel %q: not talking to the VM", host)
		}
		t.Logf("guest: %s", out)
	})
	e.timed("docker load test image", func(t *testing.T) {
		e.docker(5*time.Minute, "load", "-i", e.testTar)
	})
	checkCorpNet(t, e, corp)
	checkSSHAgentInContainer(e, sshAgent)
	e.timed("docker run --rm echo", func(t *testing.T) {
		out := e.docker(5*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "echo", "hello-from-container")
		if strings.TrimSpace(out) != "hello-from-container" {
			t.Fatalf("output %q", out)
		}
	})
	e.timed("docker context switched to vmdock", func(t *testing.T) {
		if cur := strings.TrimSpace(e.run(time.Minute, "docker", "context", "show")); cur != "vmdock" {
			t.Fatalf("current context after start = %q, want vmdock", cur)
		}
	})
	checkExclude(t, e, share9p, "node_modules")
	checkSync(t, e, syncDir)
	checkShareInotify(t, e, shareVFS)
	checkPorts(t, e)
	checkParallelStreams(t, e)
	checkHostAccess(t, e)
	checkNetStack(t, e, "gvisor")
	checkDomains(t, e, domainPorts)
	checkConfigSafety(t, e)
	for _, sh := range []struct{ name, dir string }{{"9p", share9p}, {"virtiofs", shareVFS}, {"workdir", e.work}} {
		sh := sh
		e.timed("bind mount round trip ("+sh.name+")", func(t *testing.T) {
			checkBindMount(t, e, sh.dir)
		})
	}
	e.timed("logs, status --json and docker-env", func(t *testing.T) {
		if out := e.run(time.Minute, e.vmdock, "logs", "guest"); !strings.Contains(out, "host connected") {
			t.Errorf("vmdock logs guest lacks the agent's journal:\n%s", out)
		}
		if out := e.run(time.Minute, e.vmdock, "logs", "serial"); !strings.Contains(out, "Linux version") {
			t.Errorf("vmdock logs serial lacks the kernel banner")
		}
		env := e.run(time.Minute, e.vmdock, "docker-env")
		if !strings.Contains(env, "export DOCKER_HOST='unix://"+filepath.Join(e.home, "default", "docker.sock")+"'") {
			t.Errorf("docker-env = %q", env)
		}
	})
	e.timed("vmdock ssh -- uname -a", func(t *testing.T) {
		out := e.run(2*time.Minute, e.vmdock, "ssh", "--", "uname", "-a")
		if !strings.Contains(out, "Linux vmdock") {
			t.Fatalf("ssh uname: %q", out)
		}
	})
	checkBenchSync(t, e)
	checkAgentReconnect(t, e)
	checkSSHAgentAfterAgentRestart(e, sshAgent)
	growth := prepareDiskGrowth(t, e)
	// A dead virtiofsd before the stop: the second boot, cold, must bring
	// the share back (checkVirtiofsBack).
	checkVirtiofsdKill(t, e)
	writeBeforeStop(t, e, syncDir)
	e.timed("vmdock stop", func(t *testing.T) {
		out, errOut, err := e.try(5*time.Minute, e.vmdock, "stop")
		if err != nil {
			t.Fatalf("vmdock stop: %v\n%s%s", err, out, errOut)
		}
		// The killed virtiofsd's share cannot be unmounted in the guest: the
		// stop settles the guest and ends the VM instead of waiting out a
		// power-off that hangs.
		if !strings.Contains(out+errOut, "flushed its disks; the VM was ended") {
			t.Errorf("vmdock stop with a dead virtiofsd did not settle the guest and end the VM:\n%s%s", out, errOut)
		}
		checkNothingLeft(t, e)
		if cur := strings.TrimSpace(e.run(time.Minute, "docker", "context", "show")); cur != "dummy" {
			t.Fatalf("current context after stop = %q, want the user's dummy back", cur)
		}
		after := snapshotContexts(t, e.dockerCfg)
		for path, b := range dummyBefore {
			if after[path] != b {
				t.Errorf("context file %s changed across start/stop", path)
			}
		}
	})
	checkWrittenBeforeStop(t, e, syncDir)
	// Every later start runs offline, from the cache.
	release.close()
	// The second boot also grows the data disk and brings the share of the
	// virtiofsd killed before the stop back: one boot for all three.
	e.timed("vmdock start --disk +2 (second boot, image server gone, data disk kept)", func(t *testing.T) {
		e.run(15*time.Minute, e.vmdock, growth.startArgs(startArgs)...)
		out := e.docker(2*time.Minute, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}")
		if !strings.Contains(out, "vmdock-test:latest") {
			t.Fatalf("image lost across restart; images: %q", out)
		}
	})
	checkVirtiofsBack(t, e, shareVFS)
	checkExcludeKept(t, e, share9p, "node_modules")
	checkDiskGrowth(t, e, growth)
	checkGuestPowerOff(t, e)
	e.timed("kill -9 host agent, then start recovers", func(t *testing.T) {
		pidB, err := os.ReadFile(filepath.Join(e.home, "default", "ha.pid"))
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		fmt.Sscan(string(pidB), &pid)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		out, _, _ := e.try(time.Minute, e.vmdock, "status")
		if strings.Contains(out, "Running") {
			t.Fatalf("status after kill -9 still says Running: %q", out)
		}
		t.Logf("status after kill -9: %s", strings.TrimSpace(out))
		e.run(15*time.Minute, e.vmdock, startArgs...)
		e.docker(2*time.Minute, "version")
	})
	checkDiskFullThenQEMUKill(t, e, startArgs)
	// The final stop is the one without a guest agent.
	checkStopWithoutAgent(t, e)
	e.timed("vmdock delete keeps the data disk", func(t *testing.T) {
		e.run(time.Minute, e.vmdock, "delete")
		dir := filepath.Join(e.home, "default")
		if _, err := os.Stat(filepath.Join(dir, "data.raw")); err != nil {
			t.Fatalf("data disk gone after delete without --data: %v", err)
		}
		for _, f := range []string{"disk.raw", "vmdock.yaml", "boot.iso"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				t.Errorf("%s still there after delete", f)
			}
		}
		e.run(time.Minute, e.vmdock, "delete", "--data")
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("instance folder still there after delete --data")
		}
	})
}

// newEnv gives a test its own vmdock home, docker config and work folder
// (with a space in its name, on purpose), checks that the binary and the
// arch's guest image (built here) exist, and builds the arch's test image
// tarball.
func newEnv(t *testing.T, arch string) (*env, string) {
	target := "image"
	if arch != "amd64" {
		target = "image-" + arch
	}
	if _, err := os.Stat(filepath.Join(repoRoot(t), "hack", "image", "out", "vmdock-"+arch+".tar.zst")); err != nil {
		t.Fatalf("%s guest image missing: run `make %s` first (%v)", arch, target, err)
	}
	return newEnvWithoutImage(t, arch)
}

// newEnvWithoutImage is newEnv for a test that brings its guest image
// another way (an import on a Mac, where images are not built).
func newEnvWithoutImage(t *testing.T, arch string) (*env, string) {
	e := &env{t: t, repo: repoRoot(t)}
	// Short: under a macOS TMPDIR the instance's docker.sock would pass
	// the 103 bytes a socket path may have, and vmdock start refuses it.
	base := shortdir.New(t)
	e.home = filepath.Join(base, "vmdock home")
	e.dockerCfg = filepath.Join(base, "docker-config")
	e.work = filepath.Join(base, "work dir")
	for _, d := range []string{e.home, e.dockerCfg, e.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.vmdock = filepath.Join(e.repo, "bin", "vmdock")
	if _, err := os.Stat(e.vmdock); err != nil {
		t.Fatalf("%s missing: run `make build` first", e.vmdock)
	}
	// A Mac has no static busybox to build it from: its CI job brings the
	// one the Linux image job built.
	if prebuilt := os.Getenv("VMDOCK_E2E_TESTIMAGE"); prebuilt != "" {
		abs, err := filepath.Abs(prebuilt)
		if err != nil {
			t.Fatal(err)
		}
		e.testTar = abs
		return e, base
	}
	e.testTar = filepath.Join(base, "vmdock-test.tar")
	e.timed("build test image tarball", func(t *testing.T) {
		cmd := exec.Command("go", "run", "./hack/testimage", "--arch", arch, "--out", e.testTar)
		cmd.Dir = e.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("testimage: %v\n%s", err, out)
		}
	})
	return e, base
}

// configure writes the default profile's vmdock.yaml and makes sure no VM
// outlives the test, whichever check fails.
func (e *env) configure(yaml string) {
	dir := filepath.Join(e.home, "default")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vmdock.yaml"), []byte(yaml), 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.try(3*time.Minute, e.vmdock, "stop", "--force") })
}

// checkBindMount proves `docker run -v "$dir":/w` works both ways and that
// files the container writes land on the host owned by the host user.
func checkBindMount(t *testing.T, e *env, dir string) {
	sub := filepath.Join(dir, "sub dir")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "from-host.txt"), []byte("host-data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := e.docker(3*time.Minute, "run", "--rm", "-v", dir+":/w", "vmdock-test:latest",
		"/bin/busybox", "sh", "-c", "cat '/w/sub dir/from-host.txt' && echo container-data > '/w/sub dir/from-container.txt'")
	if strings.TrimSpace(out) != "host-data" {
		t.Fatalf("container read %q from the host file", out)
	}
	p := filepath.Join(sub, "from-container.txt")
	// 9p's default cache mode (mmap) writes a closed file's data back
	// from the guest's page cache an instant later: a host read at once
	// may still see it empty (seen once in CI). Seconds would be a bug.
	began := time.Now()
	for {
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == "container-data" {
			if d := time.Since(began); d > 50*time.Millisecond {
				t.Logf("the container's file reached the host %s after docker run returned", d.Round(time.Millisecond))
			}
			break
		}
		if time.Since(began) > 5*time.Second {
			t.Fatalf("host reads %q (%v) from the file the container wrote, 5 s after docker run returned", b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != os.Getuid() {
		t.Errorf("file written in the container is owned by uid %d on the host, want %d", st.Uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o044 == 0 {
		t.Errorf("file written in the container has mode %v on the host: not readable by group/others", fi.Mode().Perm())
	}
}

func checkNothingLeft(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// This instance's processes all name its home (QEMU's pid file and
		// sockets are there); another test's QEMU may run beside this one.
		procs := processesMatching(e.home)
		sock, _ := filepath.Glob(filepath.Join(e.home, "default", "*.sock"))
		if len(procs) == 0 && len(sock) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after stop: processes %v, sockets %v", procs, sock)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// snapshotContexts reads every context meta file except vmdock's own.
func snapshotContexts(t *testing.T, dockerCfg string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(filepath.Join(dockerCfg, "contexts"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if !strings.Contains(string(b), `"Name":"vmdock"`) {
			out[p] = string(b)
		}
		return nil
	})
	if len(out) == 0 {
		t.Fatal("no context files found for the dummy context")
	}
	return out
}

// checkPorts publishes TCP and UDP ports from a container and checks the
// host sees them open, then closed after the container goes.
func checkPorts(t *testing.T, e *env) {
	e.docker(3*time.Minute, "run", "-d", "--name", "web", "-p", "18080:80", "-p", "18081:81/udp", "vmdock-test:latest")
	runReturned := time.Now()
	var visible time.Duration
	e.timed("port visible on host after docker run -p", func(t *testing.T) {
		waitForTestServer(t, 18080, 30*time.Second)
		visible = time.Since(runReturned)
		t.Logf("GET 127.0.0.1:18080 answered %.2fs after docker run returned", visible.Seconds())
	})
	e.timings[len(e.timings)-1].d = visible
	checkIPv6AndDockerSock(t, e)
	e.timed("UDP echo through published port", func(t *testing.T) {
		c, err := net.Dial("udp", "127.0.0.1:18081")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, 64)
		for i := 0; i < 20; i++ {
			c.Write([]byte("udp-ping"))
			c.SetReadDeadline(time.Now().Add(time.Second))
			n, err := c.Read(buf)
			if err == nil && string(buf[:n]) == "udp-ping" {
				return
			}
		}
		t.Fatal("no UDP echo from the container through 127.0.0.1:18081")
	})
	e.timed("published TCP and UDP ports take the direct path through the gvisor stack (status --json)", func(t *testing.T) {
		e.waitPortPath(t, "tcp", 18080, "direct")
		e.waitPortPath(t, "udp", 18081, "direct")
		waitForTestServer(t, 18080, 30*time.Second)
	})
	e.timed("a listener on the guest's loopback only is forwarded through the tunnel", func(t *testing.T) {
		e.docker(3*time.Minute, "run", "-d", "--name", "loopweb", "--network", "host", "vmdock-test:latest",
			"/echo-server", "-http", "127.0.0.1:18097", "-udp", "127.0.0.1:18098", "-tcp", "127.0.0.1:18099")
		defer e.docker(3*time.Minute, "rm", "-f", "loopweb")
		waitForTestServer(t, 18097, 30*time.Second)
		e.waitPortPath(t, "tcp", 18097, "tunnel")
	})
	e.docker(3*time.Minute, "rm", "-f", "web")
	e.checkPortClosed("127.0.0.1:18080", "docker rm")
}

// waitPortPath waits until status --json shows the forwarded port on the
// given path (the direct path opens just after the port appears).
func (e *env) waitPortPath(t *testing.T, proto string, guestPort int, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st struct {
			HostAgent struct {
				Ports []struct {
					Proto     string `json:"proto"`
					GuestPort int    `json:"guestPort"`
					Path      string `json:"path"`
				} `json:"ports"`
			} `json:"hostAgent"`
		}
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v", err)
		}
		got := "absent"
		for _, p := range st.HostAgent.Ports {
			if p.Proto == proto && p.GuestPort == guestPort {
				got = p.Path
			}
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%d path %q, want %q", proto, guestPort, got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkPortClosed is a timed check that addr stops answering within 5 s
// of what (which just returned); its row records how long that took.
func (e *env) checkPortClosed(addr, what string) {
	since := time.Now()
	var closed time.Duration
	e.timed("port closed on host after "+what, func(t *testing.T) {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				closed = time.Since(since)
				t.Logf("%s closed %.2fs after %s returned", addr, closed.Seconds(), what)
				return
			}
			c.Close()
			if time.Since(since) > 5*time.Second {
				t.Fatalf("%s still open %s after %s", addr, time.Since(since), what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	e.timings[len(e.timings)-1].d = closed
}

// checkHostAccess plays xdebug: an "IDE" listens on the host's loopback and
// a container connects to 10.254.254.254 and host.docker.internal.
func checkHostAccess(t *testing.T, e *env) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	// A DBGp init packet: decimal length, NUL, XML, NUL.
	xml := `<?xml version="1.0" encoding="iso-8859-1"?><init xmlns="urn:debugger_protocol_v1" appid="42" idekey="PHPSTORM" language="PHP" protocol_version="1.0" fileuri="file:///app/index.php"/>`
	packet := fmt.Sprintf("%d\x00%s\x00", len(xml), xml)
	e.docker(time.Minute, "network", "create", "e2enet")
	for _, target := range []struct {
		name, host string
		args       []string
	}{
		{"10.254.254.254", "10.254.254.254", nil},
		{"host.docker.internal (--add-host host-gateway)", "host.docker.internal", []string{"--add-host", "host.docker.internal:host-gateway"}},
		{"host.docker.internal (guest DNS)", "host.docker.internal", nil},
		{"host.docker.internal (user network)", "host.docker.internal", []string{"--network", "e2enet"}},
	} {
		e.timed("container reaches host loopback via "+target.name, func(t *testing.T) {
			got := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- "accept: " + err.Error()
					return
				}
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(2 * time.Minute))
				buf := make([]byte, len(packet))
				_, err = io.ReadFull(c, buf)
				if err != nil {
					got <- "read: " + err.Error()
					return
				}
				got <- string(buf)
			}()
			printf := strings.ReplaceAll(strings.ReplaceAll(packet, "\x00", `\000`), "%", "%%")
			args := append([]string{"run", "--rm"}, target.args...)
			args = append(args, "vmdock-test:latest", "/bin/busybox", "sh", "-c",
				fmt.Sprintf("printf '%s' | nc -w 30 %s %d", printf, target.host, port))
			e.docker(3*time.Minute, args...)
			select {
			case g := <-got:
				if g != packet {
					t.Fatalf("host received %q, want the DBGp init packet %q", g, packet)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("no connection arrived on the host listener")
			}
		})
	}
}

// waitForTestServer polls the test image's HTTP server on a published
// host port until it answers with its body, failing the test after timeout.
func waitForTestServer(t *testing.T, port int, timeout time.Duration) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	deadline := time.Now().Add(timeout)
	for {
		body, err := httpGet(url)
		if err == nil && body == "vmdock-test-ok\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered: %v (body %q)", url, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
