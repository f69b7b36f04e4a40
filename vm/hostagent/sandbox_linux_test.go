package hostagent

import (
	"strings"
	"testing"

	"github.com/vmdock/vmdock/internal/keychain/keychaintest"
	"github.com/vmdock/vmdock/network/inject"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

// A secret from the keychain, through a real secret-tool and Secret
// Service: the start fails naming the secret and the service while the
// item is missing, and the proxy gets the stored value once it is there;
// an environment secret beside it still comes from the environment.
func TestSandboxSecretFromKeychain(t *testing.T) {
	keychaintest.Start(t)
	t.Setenv("VMDOCK_TEST_ENV_TOKEN", "tok-env")
	cfg := config.Default(config.Host{OS: "linux", Arch: "amd64", CPUs: 2})
	cfg.Sandbox = &config.SandboxConfig{Workspace: t.TempDir(), Secrets: []config.SandboxSecret{
		{Name: "gh", Keychain: "vmdock-test-gh", Host: "api.github.com"},
		{Name: "api", Env: "VMDOCK_TEST_ENV_TOKEN", Host: "api.test.example", Header: "x-api-key"},
	}}
	ha := &hostAgent{inst: &store.Instance{Name: "agent", Dir: t.TempDir()}, cfg: cfg}
	if _, err := ha.secretProxy(); err == nil || !strings.Contains(err.Error(), `sandbox secret gh: the keychain holds no item with service "vmdock-test-gh"`) {
		t.Fatalf("a missing keychain item: %v", err)
	}
	keychaintest.Store(t, "vmdock-test-gh", "", "ghp_from_keychain")
	got, err := ha.injectedSecrets()
	want := []inject.Secret{
		{Host: "api.github.com", Header: "Authorization", Value: "Bearer ghp_from_keychain"},
		{Host: "api.test.example", Header: "x-api-key", Value: "tok-env"},
	}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("injected secrets: %+v, %v; want %+v", got, err, want)
	}
	if p, err := ha.secretProxy(); err != nil || p == nil {
		t.Fatalf("secret proxy: %v, %v", p, err)
	}
}
