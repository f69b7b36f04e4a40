package sharedrouter

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vmdock/vmdock/internal/shortdir"
)

const bindAsUserEnv = "VMDOCK_TEST_DOMAINS_BIND_HOME"

// TestDomainsRefusedPortAsAUser binds the router's port 80 the way a
// normal user's start would: this test binary again, as nobody.
func TestDomainsRefusedPortAsAUser(t *testing.T) {
	if home := os.Getenv(bindAsUserEnv); home != "" {
		bindAsUser(home)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a copy of itself as nobody")
	}
	// Short (the socket under home must fit sun_path), and one level down
	// so the chmods below never touch /tmp itself.
	dir := filepath.Join(shortdir.New(t), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "share.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, "default"), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(home, "default"), home, dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestDomainsRefusedPortAsAUser$")
	cmd.Env = append(os.Environ(), bindAsUserEnv+"="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
	if strings.Contains(string(out), "BOUND") {
		t.Skip("this kernel lets any user bind port 80 (net.ipv4.ip_unprivileged_port_start)")
	}
	if !strings.Contains(string(out), "NOTE container domains: the OS refused port 80 (domains.httpPort") ||
		!strings.Contains(string(out), "STARTED") {
		t.Errorf("as nobody, port 80 gave:\n%s\nwant one note naming domains.httpPort and the router started", out)
	}
}

func bindAsUser(home string) {
	d, notes, err := startNoting(Settings{
		Profile: "default", Home: home,
		Ports: Ports{HTTPPort: 80, HTTPSPort: 0},
		Binds: []string{"127.0.0.1"},
		Dial:  func(context.Context, string, string) (net.Conn, error) { return nil, os.ErrNotExist },
		Docker: func(context.Context) (net.Conn, error) {
			return nil, os.ErrNotExist
		},
	})
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	defer d.Close()
	for _, n := range notes {
		fmt.Println("NOTE", n)
	}
	if len(d.listening("http")) > 0 {
		fmt.Println("BOUND")
	}
	fmt.Println("STARTED")
}
