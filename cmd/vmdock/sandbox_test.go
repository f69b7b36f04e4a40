package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/store"
)

// Each bad input is one line naming the bad value and what is accepted,
// and leaves vmdock's home exactly as it was: no instance folder, no
// config.
func TestSandboxCreateRejectsBadInput(t *testing.T) {
	home, user := env(t)
	installFake(t)
	ws := t.TempDir()
	file := filepath.Join(ws, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("sandbox", "create", "taken", "--workspace", ws, "--no-start"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--workspace", filepath.Join(ws, "missing")}, "does not exist"},
		{[]string{"agent", "--workspace", user}, "home folder"},
		{[]string{"agent", "--workspace", "~"}, "home folder"},
		{[]string{"agent", "--workspace", "/"}, "is /"},
		{[]string{"agent", "--workspace", file}, "not a folder"},
		{[]string{"agent"}, "--workspace is required"},
		{[]string{"agent", "--workspace", ws, "--allow", "https://github.com/x"}, `"https://github.com/x": not a host`},
		{[]string{"agent", "--workspace", ws, "--allow", "localhost"}, `"localhost": not a host`},
		{[]string{"agent", "--workspace", ws, "--allow", "github.com:99999"}, `port "99999"`},
		{[]string{"agent", "--workspace", ws, "--allow", "127.0.0.1"}, "not an address the sandbox can reach"},
		{[]string{"taken", "--workspace", ws}, `profile "taken" exists`},
		{[]string{"bad/name", "--workspace", ws}, "bad/name"},
	} {
		before := treeHash(t, home)
		_, err := run(append([]string{"sandbox", "create"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(strings.TrimSpace(err.Error()), "\n") {
			t.Errorf("sandbox create %v: %v; want one line with %q", tt.args, err, tt.want)
		}
		if tt.want != "--workspace is required" && tt.want != `profile "taken" exists` && !strings.Contains(err.Error(), "accepted") {
			t.Errorf("sandbox create %v: %v; want it to say what is accepted", tt.args, err)
		}
		if treeHash(t, home) != before {
			t.Errorf("sandbox create %v changed vmdock's home", tt.args)
		}
	}
}

// A sandbox's config, as saved and as started: only its workspace (synced
// host to guest), no SSH agent or host CAs, the host agent's stack, its
// allow list; and `sandbox log` shows what the host agent refused.
func TestSandboxCreateAndLog(t *testing.T) {
	home, _ := env(t)
	fake := installFake(t)
	ws := t.TempDir()
	out, err := run("sandbox", "create", "agent", "--workspace", ws, "--allow", "github.com:443", "--allow", "*.npmjs.org")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(fake.starts) != 1 {
		t.Fatalf("%d starts, want 1", len(fake.starts))
	}
	cfg := fake.starts[0]
	if cfg.Sandbox == nil || cfg.Sandbox.Workspace != ws || strings.Join(cfg.Sandbox.Allow, ",") != "github.com:443,*.npmjs.org" {
		t.Fatalf("sandbox %+v", cfg.Sandbox)
	}
	if len(cfg.Mounts) != 1 || cfg.Mounts[0].Location != ws || !cfg.Mounts[0].IsSync() || cfg.HostCACerts || cfg.SSHAgent == nil || *cfg.SSHAgent ||
		cfg.Network.Stack != driver.NetStackGvisor || cfg.Activate {
		t.Fatalf("started config: mounts %+v hostCACerts %v sshAgent %v stack %s activate %v", cfg.Mounts, cfg.HostCACerts, cfg.SSHAgent, cfg.Network.Stack, cfg.Activate)
	}
	saved, err := os.ReadFile(filepath.Join(home, "agent", "vmdock.yaml"))
	if err != nil || !strings.Contains(string(saved), "sandbox:") || !strings.Contains(string(saved), "workspace: "+ws) {
		t.Fatalf("saved config lacks the sandbox: %v\n%s", err, saved)
	}

	out, err = run("sandbox", "log", "agent")
	if err != nil || !strings.Contains(out, "nothing refused yet") {
		t.Fatalf("sandbox log before any refusal: %q, %v", out, err)
	}
	inst, err := store.Open(home, "agent")
	if err != nil {
		t.Fatal(err)
	}
	line := "2026-12-07T20:00:00Z refused tcp 198.18.0.2:80\n"
	if err := os.WriteFile(inst.EgressLogPath(), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err = run("sandbox", "log", "agent"); err != nil || out != line {
		t.Fatalf("sandbox log: %q, %v; want %q", out, err, line)
	}
	if _, err := run("start", "-p", "plain"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("sandbox", "log", "plain"); err == nil || !strings.Contains(err.Error(), "not a sandbox") {
		t.Fatalf("sandbox log of a plain profile: %v", err)
	}
}
