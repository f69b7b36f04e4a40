package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/internal/keychain/keychaintest"
)

// `sandbox create --secret NAME=keychain:SERVICE@HOST` with a real
// secret-tool and Secret Service: a missing item, or no secret-tool, is
// one line naming the secret and leaves vmdock's home as it was; a stored
// item creates the sandbox, its config naming the service, never the
// value.
func TestSandboxCreateSecretFromKeychain(t *testing.T) {
	keychaintest.Start(t)
	home, _ := env(t)
	fake := installFake(t)
	ws := t.TempDir()
	flag := "gh=keychain:vmdock-test-gh@api.github.com"
	path := os.Getenv("PATH")
	for _, tt := range []struct{ path, want string }{
		{path, `sandbox secret gh: the keychain holds no item with service "vmdock-test-gh"; accepted: a generic password stored there (secret-tool store --label=vmdock-test-gh service vmdock-test-gh)`},
		{t.TempDir(), "sandbox secret gh: the keychain source needs secret-tool on Linux"},
	} {
		t.Setenv("PATH", tt.path)
		before := treeHash(t, home)
		_, err := run("sandbox", "create", "agent", "--workspace", ws, "--secret", flag)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("sandbox create: %v; want one line with %q", err, tt.want)
		}
		if treeHash(t, home) != before {
			t.Error("a failed sandbox create changed vmdock's home")
		}
	}
	t.Setenv("PATH", path)
	keychaintest.Store(t, "vmdock-test-gh", "", "ghp-keychain-secret")
	if out, err := run("sandbox", "create", "agent", "--workspace", ws, "--secret", flag); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(fake.starts) != 1 || fake.starts[0].Sandbox.Secrets[0].Keychain != "vmdock-test-gh" {
		t.Fatalf("started %+v", fake.starts)
	}
	saved, err := os.ReadFile(filepath.Join(home, "agent", "vmdock.yaml"))
	if err != nil || !strings.Contains(string(saved), "keychain: vmdock-test-gh") || strings.Contains(string(saved), "ghp-keychain-secret") {
		t.Fatalf("saved config: %v\n%s", err, saved)
	}
}
