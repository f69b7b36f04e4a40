package remote

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The baseline forward is the instance's own ssh command with -N -L, the
// URL still last and after "--".
func TestForwardCommandIsTheSessionsSSH(t *testing.T) {
	t.Setenv(CommandEnv, "ssh -F ./cfg")
	s := Server{Target: Target{User: "me", Host: "build", Port: 2222}}
	got := strings.Join(s.forwardCommand("/tmp/x.sock", "/var/run/docker.sock").Args, " ")
	want := "ssh -F ./cfg -o BatchMode=yes -o ConnectTimeout=10 -o ServerAliveInterval=5 -o ServerAliveCountMax=3 -T -e none -p 2222 -l me" +
		" -N -o ExitOnForwardFailure=yes -o StreamLocalBindUnlink=yes -L /tmp/x.sock:/var/run/docker.sock -- build"
	if got != want {
		t.Errorf("forward argv = %q; want %q", got, want)
	}
}

// HostName asks the real ssh client (-G connects nowhere) what a Host
// alias of the user's ssh config resolves to.
func TestHostNameFollowsTheSSHConfig(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	if err := os.WriteFile(cfg, []byte("Host build\n  HostName 198.18.0.9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(CommandEnv, "ssh -F "+cfg)
	for host, want := range map[string]string{"build": "198.18.0.9", "198.18.0.2": "198.18.0.2"} {
		got, err := Server{Target: Target{Host: host}}.HostName(context.Background())
		if err != nil || got != want {
			t.Errorf("HostName of %s = %q, %v; want %s", host, got, err, want)
		}
	}
	t.Setenv(CommandEnv, "ssh -F "+filepath.Join(t.TempDir(), "missing"))
	if _, err := (Server{Target: Target{Host: "build"}}).HostName(context.Background()); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("HostName with a missing ssh config = %v; want one line", err)
	}
}

// Close says why a forward ended by itself, in the session's one-line
// words, and nothing for one it ended.
func TestForwardCloseSaysWhySSHEnded(t *testing.T) {
	s := fakeSSH(t, "", "me@build: Permission denied (publickey).", 255)
	f, err := s.Forward("/tmp/x.sock", "/var/run/docker.sock")
	if err != nil {
		t.Fatal(err)
	}
	<-f.exited
	if err := f.Close(); !errors.Is(err, ErrAuth) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Close after a refused key = %v; want one line, authentication refused", err)
	}
	script := filepath.Join(t.TempDir(), "ssh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err = Server{Target: Target{Host: "build"}, SSH: []string{script}}.Forward("/tmp/x.sock", "/var/run/docker.sock")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close of a running forward = %v; want nil", err)
	}
}
