package guest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
)

func TestStartContainerd(t *testing.T) {
	s, fos := newTestServer(t)
	s.hostAccessIP = "10.254.254.254"
	must(t, s.rooms().dns.StartOn("127.0.0.1:0", "10.254.254.254", []string{"192.0.2.53"}))
	t.Cleanup(s.rooms().dns.Stop)
	toml := filepath.Join(s.Root, nerdctlTOML)
	must(t, os.MkdirAll(filepath.Dir(toml), 0o755))
	must(t, os.WriteFile(toml, []byte("host_gateway_ip = \"1.2.3.4\"\naddress = \"/run/containerd/containerd.sock\"\n[x]\ny = 1\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(s.Root, filepath.Dir(guestos.BuildkitUnit)), 0o755))
	must(t, os.WriteFile(filepath.Join(s.Root, guestos.BuildkitUnit), nil, 0o644))
	// The stub link nerdctl would skip.
	must(t, os.Symlink("../run/systemd/resolve/stub-resolv.conf", filepath.Join(s.Root, resolvConf)))
	// containerd needs a moment: its socket listens only after a few dials.
	listenLater(t, filepath.Join(s.Root, agent.GuestContainerdSocket), 250*time.Millisecond)
	if err := s.startContainerd(context.Background()); err != nil {
		t.Fatal(err)
	}
	// No process is run to ask containerd whether it answers.
	want := []string{
		"systemctl start --job-mode=ignore-dependencies containerd",
		"systemctl start --no-block buildkit",
	}
	if got := slices.DeleteFunc(slices.Clone(fos.Cmds), func(c string) bool { return strings.HasPrefix(c, "iptables") }); !slices.Equal(got, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b, _ := os.ReadFile(filepath.Join(s.Root, containerdConfig)); string(b) != containerdConfigText {
		t.Errorf("containerd started without its configuration: %q", b)
	}
	b, err := os.ReadFile(toml)
	must(t, err)
	if got := string(b); got != "host_gateway_ip = \"10.254.254.254\"\naddress = \"/run/containerd/containerd.sock\"\n[x]\ny = 1\n" {
		t.Errorf("nerdctl.toml:\n%s", got)
	}
	fi, err := os.Lstat(filepath.Join(s.Root, resolvConf))
	must(t, err)
	b, _ = os.ReadFile(filepath.Join(s.Root, resolvConf))
	if fi.Mode()&os.ModeSymlink != 0 || !strings.Contains(string(b), "\nnameserver 10.254.254.254\n") {
		t.Errorf("resolv.conf (%v):\n%s", fi.Mode(), b)
	}
	if !s.publishDNAT {
		t.Error("the port watch does not read DNAT rules")
	}
}

// listenLater listens on the unix socket sock after delay, until the
// test ends.
func listenLater(t *testing.T, sock string, delay time.Duration) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(sock), 0o755))
	stop, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		select {
		case <-time.After(delay):
		case <-stop:
			return
		}
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Errorf("listen on %s: %v", sock, err)
			return
		}
		go func() { <-stop; l.Close() }()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func TestStartContainerdGivesUp(t *testing.T) {
	s, _ := newTestServer(t)
	// A socket file nobody listens on, as a containerd that died leaves.
	sock := filepath.Join(s.Root, agent.GuestContainerdSocket)
	must(t, os.MkdirAll(filepath.Dir(sock), 0o755))
	must(t, os.WriteFile(sock, nil, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := s.startContainerd(ctx)
	if err == nil || !strings.Contains(err.Error(), "containerd did not answer on /run/containerd/containerd.sock") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Root, resolvConf)); err == nil {
		t.Error("resolv.conf written without a DNS server")
	}
}

func TestPortWatchAddsDNATPorts(t *testing.T) {
	s, fos := newTestServer(t)
	dir := t.TempDir()
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		must(t, os.WriteFile(filepath.Join(dir, f), []byte("  sl  local_address rem_address   st\n"), 0o644))
	}
	s.ProcNet = dir
	fos.Outputs = map[string]string{"iptables-save -t nat": "*nat\n-A CNI-DN-1 -p tcp -m tcp --dport 18090 -j DNAT --to-destination 10.4.0.3:80\nCOMMIT\n"}
	list := s.portLister()
	got, err := s.scanPorts(list)
	must(t, err)
	if len(got) != 0 {
		t.Errorf("docker runtime reads DNAT rules: %v", got)
	}
	s.publishDNAT = true
	got, err = s.scanPorts(list)
	must(t, err)
	if !got[portKey{Proto: "tcp", IP: "0.0.0.0", Port: 18090}] || len(got) != 1 {
		t.Errorf("ports = %v", got)
	}
}

// The agent writes containerd's configuration when there is none and
// rewrites its own, but never touches one a user wrote.
func TestWriteContainerdConfig(t *testing.T) {
	s, _ := newTestServer(t)
	p := filepath.Join(s.Root, containerdConfig)
	must(t, s.writeContainerdConfig())
	b, err := os.ReadFile(p)
	must(t, err)
	if string(b) != containerdConfigText || !strings.Contains(string(b), `disabled_plugins = ["io.containerd.grpc.v1.cri"]`) {
		t.Fatalf("written:\n%s", b)
	}

	older := containerdConfigMarker + " by an older agent\nversion = 2\n"
	must(t, os.WriteFile(p, []byte(older), 0o644))
	must(t, s.writeContainerdConfig())
	if b, _ := os.ReadFile(p); string(b) != containerdConfigText {
		t.Fatalf("the agent's own older file kept:\n%s", b)
	}

	mine := "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause:3.9\"\n"
	must(t, os.WriteFile(p, []byte(mine), 0o644))
	must(t, s.writeContainerdConfig())
	if b, _ := os.ReadFile(p); string(b) != mine {
		t.Fatalf("a user's configuration was rewritten:\n%s", b)
	}
}
