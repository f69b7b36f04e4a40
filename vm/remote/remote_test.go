package remote

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	good := map[string]Target{
		"ssh://host":                  {Host: "host"},
		"ssh://me@build.example:2222": {User: "me", Host: "build.example", Port: 2222},
		"ssh://[2001:db8::1]:22/":     {Host: "2001:db8::1", Port: 22},
	}
	for s, want := range good {
		got, err := ParseURL(s)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	bad := map[string]string{
		"host":                 "has no scheme",
		"tcp://host:2375":      `scheme "tcp" is not supported`,
		"ssh://":               "names no usable host",
		"ssh://-oProxyCommand": "names no usable host",
		"ssh://-x@host":        "names no usable host",
		"ssh://host:0":         "port",
		"ssh://host:99999":     "port",
		"ssh://me:pw@host":     "password",
		"ssh://host/var/run":   "path",
		"ssh://host?x=1":       "path, query",
	}
	for s, want := range bad {
		_, err := ParseURL(s)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "accepted: ssh://[user@]host[:port]") || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseURL(%q) = %v; want one line with %q and what is accepted", s, err, want)
		}
	}
}

// fakeSSH is an ssh that prints out and err and exits with code, for the
// answers a real server gives that this machine cannot stage.
func fakeSSH(t *testing.T, out, errOut string, code int) Server {
	dir := t.TempDir()
	script := filepath.Join(dir, "ssh")
	body := "#!/bin/sh\nprintf '%s' \"$FAKE_OUT\"\nprintf '%s\\n' \"$FAKE_ERR\" >&2\nexit $FAKE_CODE\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_OUT", out)
	t.Setenv("FAKE_ERR", errOut)
	t.Setenv("FAKE_CODE", strconv.Itoa(code))
	return Server{Target: Target{Host: "build", User: "me"}, Socket: "/var/run/docker.sock", SSH: []string{script}}
}

func TestProbeSaysWhatFailed(t *testing.T) {
	cases := []struct {
		name, out, errOut string
		code              int
		want              string
		is                error
	}{
		{"unreachable", "", "ssh: connect to host build port 22: Connection refused", 255, "check the address, the port and that sshd runs there", ErrUnreachable},
		{"no route", "", "ssh: connect to host build port 22: No route to host", 255, "No route to host", ErrUnreachable},
		{"unknown name", "", "ssh: Could not resolve hostname build: Name or service not known", 255, "does not resolve", ErrUnreachable},
		{"refused key", "", "me@build: Permission denied (publickey).", 255, "authorized_keys", ErrAuth},
		{"unknown host key", "", "Host key verification failed.", 255, "known_hosts", ErrAuth},
		{"no docker", "x86_64\nmissing\n", "", 0, "no Docker engine: /var/run/docker.sock is not a socket", nil},
		{"not in the docker group", "x86_64\ndenied\n", "", 0, "add it to the docker group", nil},
		{"unsupported arch", "riscv64\nok\n", "", 0, `arch "riscv64" is not supported; accepted: x86_64 or aarch64`, nil},
		{"a shell that says more", "Welcome!\nx86_64\nok\n", "", 0, "is the login shell POSIX?", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fakeSSH(t, c.out, c.errOut, c.code)
			_, err := s.Probe(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Probe = %v; want one line with %q", err, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("Probe = %v; want it to be %v", err, c.is)
			}
		})
	}
	s := fakeSSH(t, "aarch64\nok\n", "", 0)
	if f, err := s.Probe(context.Background()); err != nil || f.Arch != "arm64" {
		t.Errorf("Probe of an arm64 server = %+v, %v", f, err)
	}
}

// TestUnreachableWithRealSSH points the system ssh at a closed port of
// this machine's loopback.
func TestUnreachableWithRealSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	t.Setenv(CommandEnv, "")
	s := Server{Target: Target{Host: "127.0.0.1", Port: 1}, Socket: "/var/run/docker.sock"}
	_, err := s.Probe(context.Background())
	if !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Probe of a closed port = %v; want one line, unreachable", err)
	}
}

func TestSSHCommandKeepsTheURLOutOfOptions(t *testing.T) {
	s := Server{Target: Target{User: "me", Host: "build", Port: 2222}, SSH: []string{"ssh", "-F", "cfg"}}
	got := strings.Join(s.sshCommand(), " ")
	want := "ssh -F cfg -o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=5 -o ServerAliveCountMax=3 -T -e none -p 2222 -l me -- build"
	if got != want {
		t.Errorf("ssh argv = %q; want %q", got, want)
	}
}

func TestShellQuote(t *testing.T) {
	out, err := exec.Command("sh", "-c", "printf '%s' "+shellQuote(`it's $HOME "x"`)).Output()
	if err != nil || string(out) != `it's $HOME "x"` {
		t.Errorf("quoted word came back as %q (%v)", out, err)
	}
}

// localSSH runs the remote command line here, in a home folder of the
// test's: the server's shell scripts run for real.
func localSSH(t *testing.T) (Server, string) {
	dir := t.TempDir()
	script := filepath.Join(dir, "ssh")
	body := "#!/bin/sh\nfor a; do last=$a; done\nexec sh -c \"$last\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	t.Setenv("HOME", home)
	return Server{Target: Target{Host: "build"}, Socket: "/var/run/docker.sock", SSH: []string{script}}, home
}

// delete takes the helpers and this instance's sync state off the server;
// another instance's sync state and the synced folders stay.
func TestRemoveHelpersKeepsSyncedFolders(t *testing.T) {
	s, home := localSSH(t)
	cache := filepath.Join(home, ".cache", "vmdock")
	for _, f := range []string{"vmdock-agent-0123456789abcdef", "sync/big-0a1b2c3d4e5f/mutagen/x", "sync/big-0a1b2c3d4e5f/claims/s1", "sync/other-ffffffffffff/claims/s1"} {
		mustWrite(t, filepath.Join(cache, f))
	}
	synced := filepath.Join(home, "src", "app", "main.go")
	mustWrite(t, synced)
	if err := s.RemoveHelpers(context.Background(), "big-0a1b2c3d4e5f"); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"vmdock-agent-0123456789abcdef", "sync/big-0a1b2c3d4e5f"} {
		if _, err := os.Stat(filepath.Join(cache, gone)); err == nil {
			t.Errorf("%s is still on the server", gone)
		}
	}
	for _, kept := range []string{filepath.Join(cache, "sync/other-ffffffffffff/claims/s1"), synced} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s is gone: %v", kept, err)
		}
	}
	if err := s.RemoveHelpers(context.Background(), "../x"); err == nil || !strings.Contains(err.Error(), `"../x"`) {
		t.Errorf("a key that is no folder name: %v", err)
	}
	if err := s.RemoveHelpers(context.Background(), "other-ffffffffffff"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Error("the empty ~/.cache/vmdock stays on the server")
	}
}

func mustWrite(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
