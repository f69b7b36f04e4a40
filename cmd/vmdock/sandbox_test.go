package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	t.Setenv("VMDOCK_TEST_TOKEN", "x")
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
		{[]string{"agent", "--workspace", ws, "--secret", "gh=VMDOCK_TEST_UNSET@api.github.com"}, "the variable VMDOCK_TEST_UNSET is not set"},
		{[]string{"agent", "--workspace", ws, "--secret", "gh"}, `--secret "gh"`},
		{[]string{"agent", "--workspace", ws, "--secret", "gh=VMDOCK_TEST_TOKEN@*.github.com"}, `host "*.github.com"`},
		{[]string{"agent", "--workspace", ws, "--secret", "gh=vault:gh@api.github.com"}, `unknown source "vault:"`},
		{[]string{"agent", "--workspace", ws, "--secret", "gh=keychain:@api.github.com"}, "an empty keychain service"},
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
	t.Setenv("VMDOCK_TEST_TOKEN", "tok-123-secret")
	out, err := run("sandbox", "create", "agent", "--workspace", ws, "--allow", "github.com:443", "--allow", "*.npmjs.org", "--secret", "gh=VMDOCK_TEST_TOKEN@api.github.com")
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
	if err != nil || !strings.Contains(string(saved), "sandbox:") || !strings.Contains(string(saved), "workspace: "+ws) || !strings.Contains(string(saved), "env: VMDOCK_TEST_TOKEN") {
		t.Fatalf("saved config lacks the sandbox: %v\n%s", err, saved)
	}
	if strings.Contains(string(saved), "tok-123-secret") {
		t.Fatal("the secret's value was written to the config")
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

// diff, accept and reject through the guest agent's exec: the fake guest
// runs the commands (real tar and sh) on this machine with its copy of
// the workspace in a folder of its own. A host edit of a file the agent
// also changed is refused by accept, listed, and kept.
func TestSandboxDiffAcceptReject(t *testing.T) {
	env(t)
	installFake(t)
	ws, guest := t.TempDir(), t.TempDir()
	writeTestFile(t, filepath.Join(ws, "a.txt"), "a\n")
	writeTestFile(t, filepath.Join(ws, "b.txt"), "b\n")
	if _, err := run("sandbox", "create", "agent", "--workspace", ws); err != nil {
		t.Fatal(err)
	}
	execVM = func(ctx context.Context, _ *store.Instance, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		args := slices.Clone(argv)
		for i, a := range args {
			if a == ws {
				args[i] = guest
			}
		}
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
		if err := cmd.Run(); err != nil {
			return 1, nil
		}
		return 0, nil
	}
	writeTestFile(t, filepath.Join(guest, "a.txt"), "agent a\n")
	writeTestFile(t, filepath.Join(guest, "b.txt"), "agent b\n")
	writeTestFile(t, filepath.Join(ws, "b.txt"), "host b\n")

	out, err := run("sandbox", "diff", "agent")
	if err != nil || !strings.Contains(out, "-a\n+agent a\n") || !strings.Contains(out, "# b.txt: changed on the host too") {
		t.Fatalf("sandbox diff: %v\n%s", err, out)
	}
	out, err = run("sandbox", "accept", "agent")
	if err == nil || !strings.Contains(err.Error(), "b.txt: changed on the host too") || !strings.Contains(out, "accepted a.txt") {
		t.Fatalf("sandbox accept: %v\n%s", err, out)
	}
	if readTestFile(t, filepath.Join(ws, "a.txt")) != "agent a\n" || readTestFile(t, filepath.Join(ws, "b.txt")) != "host b\n" {
		t.Fatal("accept did not write a.txt, or overwrote the host's b.txt")
	}
	if out, err = run("sandbox", "reject", "agent", "b.txt"); err != nil || !strings.Contains(out, "rejected b.txt") {
		t.Fatalf("sandbox reject: %v\n%s", err, out)
	}
	if readTestFile(t, filepath.Join(guest, "b.txt")) != "host b\n" {
		t.Fatal("reject did not put the host's b.txt back in the guest")
	}
	if out, err = run("sandbox", "diff", "agent"); err != nil || out != "" {
		t.Fatalf("diff after accept and reject: %v\n%q", err, out)
	}
}

func writeTestFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTestFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
