// Package keychaintest runs a real Secret Service for a test: a D-Bus
// session bus and a GNOME Keyring daemon of the test's own, in a temporary
// home, so libsecret's secret-tool stores and looks up items without the
// user's keyring or session ever being touched.
package keychaintest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// busConfig is a session bus that starts nothing on demand: a service the
// test did not start itself cannot answer, with the user's home or not.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// Start runs a Secret Service for the rest of t, its login keyring
// unlocked, and points this process's session bus at it. A host without
// dbus-daemon, gnome-keyring-daemon or secret-tool skips t, and fails it
// under CI=true, where hack/deps.sh installs them.
func Start(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"dbus-daemon", "gnome-keyring-daemon", "secret-tool"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("a real Secret Service needs %s (Debian: dbus-daemon, gnome-keyring, libsecret-tools; hack/deps.sh installs them): %v", tool, err)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	// Short: the bus's and the keyring's sockets live here, and under a
	// long TMPDIR (a Mac's, or CI's 53 bytes) t.TempDir() would pass the
	// 108 bytes a socket path may have, and the bus would print nothing.
	dir := shortdir.New(t)
	env := homeEnv(t, dir)
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, busConfig, filepath.Join(dir, "bus")), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startBus(t, conf, env)
	env = append(env, "DBUS_SESSION_BUS_ADDRESS="+addr)
	keyring := exec.Command("gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets")
	keyring.Env, keyring.Stdin = env, strings.NewReader("vmdock-test-password")
	if err := keyring.Start(); err != nil {
		t.Fatalf("gnome-keyring-daemon: %v", err)
	}
	t.Cleanup(func() {
		_ = keyring.Process.Kill()
		_ = keyring.Wait()
	})
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", addr)
	waitForService(t)
}

// waitForService waits until the keyring answers on the bus: a lookup
// of an item nobody stored then finds nothing, where before it fails.
func waitForService(t *testing.T) {
	var out []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		out, err = exec.Command("secret-tool", "lookup", "service", "vmdock-keychaintest-probe").CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 && len(out) == 0 {
			return
		}
	}
	t.Fatalf("the test's gnome-keyring-daemon did not answer within 10 s: %s", out)
}

// homeEnv is this process's environment with a home and XDG folders
// under dir, where the keyring keeps its files and sockets.
func homeEnv(t *testing.T, dir string) []string {
	home, run := filepath.Join(dir, "home"), filepath.Join(dir, "run")
	for _, d := range []string{home, run} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	env := os.Environ()
	for k, v := range map[string]string{
		"HOME": home, "XDG_RUNTIME_DIR": run, "XDG_DATA_HOME": filepath.Join(home, ".local/share"),
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"), "XDG_CACHE_HOME": filepath.Join(home, ".cache"),
	} {
		env = append(env, k+"="+v)
	}
	return env
}

// startBus starts a session bus with conf, stopped when t ends, and
// returns its address.
func startBus(t *testing.T, conf string, env []string) string {
	bus := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--print-address=1")
	bus.Env = env
	stdout, err := bus.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Start(); err != nil {
		t.Fatalf("dbus-daemon: %v", err)
	}
	t.Cleanup(func() {
		_ = bus.Process.Kill()
		_ = bus.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case addr := <-line:
		if addr == "" {
			t.Fatalf("dbus-daemon printed no address (it could not listen on %s?)", conf)
		}
		return addr
	case <-time.After(10 * time.Second):
		t.Fatal("dbus-daemon printed no address within 10 s")
	}
	return ""
}

// Store adds an item to the test's Secret Service, as a user would with
// secret-tool store; an empty account is left out.
func Store(t *testing.T, service, account, secret string) {
	t.Helper()
	args := []string{"store", "--label=" + service, "service", service}
	if account != "" {
		args = append(args, "account", account)
	}
	cmd := exec.Command("secret-tool", args...)
	cmd.Stdin = strings.NewReader(secret)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("secret-tool store %s: %v\n%s", service, err, out)
	}
}
