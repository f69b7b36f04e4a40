package containerd

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/agent/guest/runtime"
)

func TestStartContainerd(t *testing.T) {
	s, fos := newTestServer(t)
	dnat := false
	s.UnitsStarted = func() { dnat = true }
	// A reserve that cannot be freed is only logged.
	reserveAsked := 0
	s.ReleaseReserve = func() (bool, error) { reserveAsked++; return false, errors.New("reserve: permission denied") }
	toml := filepath.Join(s.Root, nerdctlTOML)
	must(t, os.MkdirAll(filepath.Dir(toml), 0o755))
	must(t, os.WriteFile(toml, []byte("host_gateway_ip = \"1.2.3.4\"\naddress = \"/run/containerd/containerd.sock\"\n[x]\ny = 1\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(s.Root, filepath.Dir(guestos.BuildkitUnit)), 0o755))
	must(t, os.WriteFile(filepath.Join(s.Root, guestos.BuildkitUnit), nil, 0o644))
	// The stub link nerdctl would skip.
	must(t, os.Symlink("../run/systemd/resolve/stub-resolv.conf", filepath.Join(s.Root, resolvConf)))
	// containerd needs a moment: its socket listens only after a few dials.
	listenLater(t, filepath.Join(s.Root, agent.GuestContainerdSocket), 250*time.Millisecond)
	if err := s.Start(context.Background(), runtime.Config{HostAccessIP: "10.254.254.254", DNSIP: "10.254.254.254"}); err != nil {
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
	if b, _ := os.ReadFile(filepath.Join(s.Root, runtime.ContainerdConfig)); string(b) != runtime.ContainerdConfigText {
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
	if reserveAsked != 1 {
		t.Errorf("reserve asked %d times before the start, want once", reserveAsked)
	}
	if !dnat {
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
	err := s.Start(ctx, runtime.Config{})
	if err == nil || !strings.Contains(err.Error(), "containerd did not answer on /run/containerd/containerd.sock") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Root, resolvConf)); err == nil {
		t.Error("resolv.conf written without a DNS server")
	}
}
