package remotetest

import (
	"github.com/vmdock/vmdock/internal/shortdir"

	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/migrate/migratetest"
	"github.com/vmdock/vmdock/vm/remote"
)

// The remote instance's test runs with real parts and no VM: Debian's
// openssh-server and docker.io's dockerd in a network namespace the test
// makes (the server, 198.18.0.2), the test itself in another (the laptop,
// 198.18.0.1), a veth pair between them. It takes about 40 s (the link is
// cut for 20 s); -short skips it.
const (
	remoteTestInNSEnv = "VMDOCK_REMOTE_TEST_IN_NS"
	remoteServerAddr  = "198.18.0.2"
	remoteLaptopAddr  = "198.18.0.1"
	remoteTestPort    = "18080"
)

func TestRemoteInstanceWithRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("about 40 s with sshd and dockerd in network namespaces; not with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces, sshd and dockerd need root")
	}
	for _, tool := range []string{"unshare", "nsenter", "ip", "ssh", "ssh-keygen", "/usr/sbin/sshd", "docker", "/bin/busybox"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install openssh-server openssh-client busybox-static; hack/deps.sh)", tool)
		}
	}
	if _, err := migratetest.DockerdPath(); err != nil {
		t.Skip(err)
	}
	if os.Getenv(remoteTestInNSEnv) == "" {
		// The laptop's side gets a namespace of its own too: nothing the
		// test adds touches this machine's network.
		cmd := exec.Command("unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" -test.run="^$1\$" -test.v`, os.Args[0], t.Name())
		cmd.Env = append(os.Environ(), remoteTestInNSEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in the laptop's namespace:\n%s", out)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	s := startRemoteServer(t)
	laptop := serveLaptopPort(t)
	vmdock := buildVmdock(t, s.dir)
	home, dockerConfig := filepath.Join(s.dir, "vmdock-home"), filepath.Join(s.dir, "docker-config")
	t.Setenv("VMDOCK_HOME", home)
	t.Setenv("DOCKER_CONFIG", dockerConfig)
	t.Setenv("DOCKER_HOST", "")
	if err := os.MkdirAll(filepath.Join(home, "remote"), 0o700); err != nil {
		t.Fatal(err)
	}
	// hostPorts and socket are YAML settings; the URL comes with --remote.
	writeFile(t, filepath.Join(home, "template.yaml"), fmt.Sprintf("remote:\n  url: ssh://placeholder\n  socket: %s\n  hostPorts: [%d]\n", s.engineSocket, laptop))
	ctx := context.Background()
	proj := newProject(t, s.dir)
	cli := func(args ...string) string {
		t.Helper()
		out, err := proj.laptopCommand(vmdock, append([]string{"-p", "remote"}, args...)...).CombinedOutput()
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(home, "remote", "hostagent.log"))
			t.Fatalf("vmdock %s: %v\n%s\nhost agent log:\n%s\n%s", strings.Join(args, " "), err, out, tail(string(b)), s.logs())
		}
		return string(out)
	}
	cli("start", "--remote", "ssh://root@"+remoteServerAddr+":22", "-V", proj.path)
	stopped := false
	defer func() {
		if !stopped {
			exec.Command(vmdock, "-p", "remote", "stop").Run()
		}
	}()
	if cur := contextShow(t); cur != "vmdock-remote" {
		t.Fatalf("the docker context after start is %q; want vmdock-remote", cur)
	}
	sock := filepath.Join(home, "remote", "docker.sock")
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", args...).CombinedOutput() // through the context
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	docker("import", s.image, "remote-test")
	docker("run", "-d", "--name", "web", "-p", remoteTestPort+":8080", "remote-test", "httpd", "-f", "-p", "8080", "-h", "/www")
	checkRemotePort(t, "after docker run")
	hostAccess := func(when string) {
		t.Helper()
		out := docker("run", "--rm", "--add-host", "host.docker.internal:host-gateway", "remote-test",
			"wget", "-qO-", fmt.Sprintf("http://host.docker.internal:%d/", laptop))
		if out != "laptop-ok" {
			t.Fatalf("%s: a container reaching the laptop's port %d got %q", when, laptop, out)
		}
	}
	hostAccess("after start")
	proj.seenByContainer(t, docker, "hello.txt", "from the laptop", "after start")
	proj.editOnLaptop(t, "hello.txt", "edited on the laptop")
	proj.seenByContainer(t, docker, "hello.txt", "edited on the laptop", "after an edit")
	proj.writtenByContainer(t, docker, "from-container.txt", "written-in-a-container", "after start")
	if out := cli("sync", "status"); !strings.Contains(out, proj.path+" -> "+proj.path+": ") {
		t.Errorf("vmdock sync status says %q; want the project synced to the same path", out)
	}

	cutLink(t, 20*time.Second)
	if err := waitDockerPing(ctx, sock, 2*time.Minute); err != nil {
		t.Fatalf("after the link came back: %v\n%s", err, s.logs())
	}
	checkRemotePort(t, "after the link came back")
	hostAccess("after the link came back")
	proj.editOnLaptop(t, "hello.txt", "edited after the cut")
	proj.seenByContainer(t, docker, "hello.txt", "edited after the cut", "after the link came back")
	proj.writtenByContainer(t, docker, "after-cut.txt", "written-after-the-cut", "after the link came back")

	// What the server's side wrote just before the stop is on the laptop
	// once stop returns.
	writeFile(t, filepath.Join(proj.path, "last.txt"), "written before the stop\n")
	cli("stop")
	stopped = true
	if b, err := os.ReadFile(filepath.Join(proj.laptop, "last.txt")); err != nil || string(b) != "written before the stop\n" {
		t.Errorf("after the stop the laptop's last.txt holds %q (%v); want what the server wrote before it", b, err)
	}
	if cur := contextShow(t); cur != "default" {
		t.Errorf("the docker context after stop is %q; want default back", cur)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("the instance's docker.sock is still there after the stop")
	}
	out, err := exec.Command("docker", "-H", "unix://"+s.engineSocket, "ps", "--format", "{{.Names}}").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "web" {
		t.Fatalf("after the stop the server's engine runs %q (%v); want the container web still running", out, err)
	}
	proj.refusedByNewInstance(t, vmdock)
	helpers, _ := filepath.Glob(filepath.Join(s.dir, "roothome", ".cache", "vmdock", "vmdock-agent-*"))
	if len(helpers) != 1 {
		t.Fatalf("the server's ~/.cache/vmdock holds %v; want the one helper", helpers)
	}
	if states, _ := filepath.Glob(filepath.Join(s.dir, "roothome", ".cache", "vmdock", "sync", "remote-*")); len(states) != 1 {
		t.Fatalf("the server's ~/.cache/vmdock/sync holds %v; want the instance's sync state", states)
	}
	if out := cli("delete"); !strings.Contains(out, "helper was removed") {
		t.Errorf("delete said %q", out)
	}
	if _, err := os.Stat(helpers[0]); err == nil {
		t.Error("the helper is still on the server after delete")
	}
	if states, _ := filepath.Glob(filepath.Join(s.dir, "roothome", ".cache", "vmdock", "sync", "*")); len(states) != 0 {
		t.Errorf("the instance's sync state is still on the server after delete: %v", states)
	}
	if b, err := os.ReadFile(filepath.Join(proj.path, "hello.txt")); err != nil || string(b) != "edited after the cut" {
		t.Errorf("after delete the server's synced copy holds %q (%v); want it kept, as the user's files", b, err)
	}
	out, err = exec.Command("docker", "-H", "unix://"+s.engineSocket, "ps", "--format", "{{.Names}}").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "web" {
		t.Errorf("after delete the server's engine runs %q (%v); want its container untouched", out, err)
	}
}

// refusedByNewInstance starts a new instance on the same folder (as
// after a delete, which keeps the server's copy): the copy holds files
// this instance never synced, so the start fails with one line naming
// it, and neither side changes.
func (p project) refusedByNewInstance(t *testing.T, vmdock string) {
	t.Helper()
	out, err := p.laptopCommand(vmdock, "-p", "again", "start", "--remote", "ssh://root@"+remoteServerAddr+":22", "-V", p.path).CombinedOutput()
	if err == nil {
		p.laptopCommand(vmdock, "-p", "again", "stop").Run()
		t.Fatalf("a new instance started on a server folder it never synced:\n%s", out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "start failed") {
			line = l
		}
	}
	if !strings.Contains(line, "the server's folder "+p.path+" already holds files vmdock did not sync") || !strings.Contains(line, "mv "+p.path) {
		t.Errorf("the refused start says %q; want one line naming the folder and what to do\n%s", line, out)
	}
	for _, f := range []string{filepath.Join(p.path, "hello.txt"), filepath.Join(p.laptop, "hello.txt")} {
		if b, err := os.ReadFile(f); err != nil || string(b) != "edited after the cut" {
			t.Errorf("after the refused start %s holds %q (%v); want it untouched", f, b, err)
		}
	}
}

// project is the laptop's folder that the instance syncs to the same path
// on the server. Both sides are on this machine, so they must see
// different files at that path: vmdock's processes (the laptop) run in a
// mount namespace of their own where the laptop's files are bound over
// the path's parent; the server (sshd's helper, dockerd) sees the real
// parent, where the path does not exist until the helper makes it. The
// test reads the server's copy at path and the laptop's at laptop.
type project struct {
	path   string // the same path on both sides
	laptop string // where the laptop's copy really is
}

func newProject(t *testing.T, dir string) project {
	p := project{path: filepath.Join(dir, "src", "app"), laptop: filepath.Join(dir, "laptop", "app")}
	if err := os.MkdirAll(filepath.Dir(p.path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p.laptop, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(p.laptop, "hello.txt"), "from the laptop")
	return p
}

// laptopCommand runs vmdock on the laptop's side: what it starts (the
// host agent) stays in the laptop's mount namespace.
func (p project) laptopCommand(vmdock string, args ...string) *exec.Cmd {
	argv := append([]string{"-m", "sh", "-c", `mount --bind "$0" "$1" && shift && exec "$@"`,
		filepath.Dir(p.laptop), filepath.Dir(p.path), vmdock}, args...)
	return exec.Command("unshare", argv...)
}

func (p project) editOnLaptop(t *testing.T, name, content string) {
	writeFile(t, filepath.Join(p.laptop, name), content)
}

// seenByContainer waits for the server's copy of name to hold want, then
// has a container that binds the project's path read it there.
func (p project) seenByContainer(t *testing.T, docker func(...string) string, name, want, when string) {
	t.Helper()
	waitFileHolds(t, filepath.Join(p.path, name), want, when+": the server's copy")
	file := filepath.Join(p.path, name)
	if got := docker("run", "--rm", "-v", p.path+":"+p.path, "remote-test", "busybox", "cat", file); got != want {
		t.Fatalf("%s: a container binding %s reads %q from %s; want %q", when, p.path, got, name, want)
	}
}

// writtenByContainer has a container write name in the project's path
// and waits for it on the laptop.
func (p project) writtenByContainer(t *testing.T, docker func(...string) string, name, content, when string) {
	t.Helper()
	docker("run", "--rm", "-v", p.path+":"+p.path, "remote-test", "sh", "-c", "echo "+content+" > "+filepath.Join(p.path, name))
	waitFileHolds(t, filepath.Join(p.laptop, name), content+"\n", when+": the laptop's copy of what a container wrote")
}

// waitFileHolds waits up to 15 s for path to hold want.
func waitFileHolds(t *testing.T, path, want, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s holds %q (%v); want %q", what, path, b, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// buildVmdock builds the command line (with the guest agents that make
// build embedded) into dir.
func buildVmdock(t *testing.T, dir string) string {
	bin := filepath.Join(dir, "vmdock")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/vmdock/vmdock/cmd/vmdock")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build vmdock: %v\n%s", err, out)
	}
	return bin
}

func contextShow(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("docker", "context", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("docker context show: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// waitDockerPing polls the engine's /_ping on sock until it answers.
func waitDockerPing(ctx context.Context, sock string, timeout time.Duration) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := c.Get("http://docker/_ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no answer on %s within %s: %v", sock, timeout, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// checkRemotePort waits for the published port on both loopbacks.
func checkRemotePort(t *testing.T, when string) {
	t.Helper()
	for _, addr := range []string{"127.0.0.1", "[::1]"} {
		url := "http://" + addr + ":" + remoteTestPort + "/"
		var last string
		deadline := time.Now().Add(30 * time.Second)
		for {
			body, err := httpGet(url)
			if err == nil && body == "vmdock-test-ok\n" {
				break
			}
			last = fmt.Sprintf("%q %v", body, err)
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s answers %s", when, url, last)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// serveLaptopPort serves "laptop-ok" on a port of the laptop's loopback.
func serveLaptopPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "laptop-ok") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// remoteServer is the server's namespace with its sshd and dockerd.
type remoteServer struct {
	dir          string
	engineSocket string
	image        string
	engines      *migratetest.Engines
}

func (s *remoteServer) logs() string {
	b, _ := os.ReadFile(filepath.Join(s.engines.List[0].Dir, "dockerd.log"))
	sshd, _ := os.ReadFile(filepath.Join(s.dir, "sshd.log"))
	return "sshd:\n" + tail(string(sshd)) + "\ndockerd:\n" + tail(string(b))
}

func tail(s string) string {
	if len(s) > 3000 {
		return s[len(s)-3000:]
	}
	return s
}

func startRemoteServer(t *testing.T) *remoteServer {
	// Short: the instance's sockets live under it, and a macOS-length
	// TMPDIR would push them past the socket path limit.
	s := &remoteServer{dir: shortdir.New(t)}
	holder := exec.Command("unshare", "-n", "sleep", "3600")
	holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	time.Sleep(200 * time.Millisecond) // unshare has made the namespace and exec'd sleep
	netns := fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid)
	run(t, "ip", "link", "add", "vmdl0", "type", "veth", "peer", "name", "vmdr0", "netns", fmt.Sprint(holder.Process.Pid))
	run(t, "ip", "addr", "add", remoteLaptopAddr+"/24", "dev", "vmdl0")
	run(t, "ip", "link", "set", "vmdl0", "up")
	run(t, "nsenter", "--net="+netns, "sh", "-c", "ip link set lo up && ip addr add "+remoteServerAddr+"/24 dev vmdr0 && ip link set vmdr0 up")
	engines, err := migratetest.StartWith("/tmp/vmdock-remote-runs", "vmdock-remote-test", migratetest.Options{NetNS: netns}, "server")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(engines.Stop)
	s.engines, s.engineSocket = engines, engines.List[0].Socket
	s.writeImage(t)
	s.startSSHD(t, netns)
	return s
}

func (s *remoteServer) writeImage(t *testing.T) {
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	tar, err := migratetest.ImageTar(map[string][]byte{"bin/busybox": busybox, "bin/sh": busybox, "bin/httpd": busybox, "bin/wget": busybox, "www/index.html": []byte("vmdock-test-ok\n")})
	if err != nil {
		t.Fatal(err)
	}
	s.image = filepath.Join(s.dir, "image.tar")
	if err := os.WriteFile(s.image, tar, 0o600); err != nil {
		t.Fatal(err)
	}
}

// startSSHD runs sshd in the server's namespace with its own config, host
// key and the test's key; root's home there is a folder of the test, so
// the helper's install never touches this machine's /root.
func (s *remoteServer) startSSHD(t *testing.T, netns string) {
	d := s.dir
	run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(d, "host_key"))
	run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(d, "id"))
	copyFile(t, filepath.Join(d, "id.pub"), filepath.Join(d, "authorized_keys"))
	hostPub, _ := os.ReadFile(filepath.Join(d, "host_key.pub"))
	writeFile(t, filepath.Join(d, "known_hosts"), remoteServerAddr+" "+string(hostPub))
	writeFile(t, filepath.Join(d, "sshd_config"), fmt.Sprintf(`ListenAddress %s:22
HostKey %s/host_key
AuthorizedKeysFile %s/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
ClientAliveInterval 5
ClientAliveCountMax 3
`, remoteServerAddr, d, d))
	writeFile(t, filepath.Join(d, "ssh_config"), fmt.Sprintf(`Host %s
  IdentityFile %s/id
  IdentitiesOnly yes
  UserKnownHostsFile %s/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
`, remoteServerAddr, d, d))
	t.Setenv(remote.CommandEnv, "ssh -F "+filepath.Join(d, "ssh_config"))
	home := filepath.Join(d, "roothome")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation folder
	logf, err := os.Create(filepath.Join(d, "sshd.log"))
	if err != nil {
		t.Fatal(err)
	}
	sshd := exec.Command("nsenter", "--net="+netns, "unshare", "-m", "sh", "-c",
		`mount --bind "$0" /root && exec /usr/sbin/sshd -D -e -f "$1"`, home, filepath.Join(d, "sshd_config"))
	sshd.Stdout, sshd.Stderr = logf, logf
	sshd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sshd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sshd.Process.Kill(); sshd.Wait(); logf.Close() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", remoteServerAddr+":22", time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd does not listen: %v\n%s", err, s.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cutLink takes the laptop's end of the veth down for d.
func cutLink(t *testing.T, d time.Duration) {
	run(t, "ip", "link", "set", "vmdl0", "down")
	time.Sleep(d)
	run(t, "ip", "link", "set", "vmdl0", "up")
}

func run(t *testing.T, argv ...string) string {
	t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(b))
}
