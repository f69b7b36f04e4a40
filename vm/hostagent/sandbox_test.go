package hostagent

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

// A sandbox's host agent gives the guest no address for the host's
// loopback, and its stack's refusals land in the instance's egress log;
// a normal instance keeps both as they were.
func TestSandboxHostAgentCutsHostAccessAndLogsRefusals(t *testing.T) {
	inst := &store.Instance{Name: "agent", Dir: t.TempDir()}
	cfg := config.Default(config.Host{OS: "linux", Arch: "amd64", CPUs: 2})
	plain := &hostAgent{inst: inst, cfg: cfg}
	if ip := plain.guestHostAccessIP(); ip != config.DefaultHostAccessIP {
		t.Fatalf("a normal instance's host access address: %q", ip)
	}
	if p, err := plain.egressPolicy(); p != nil || err != nil {
		t.Fatalf("a normal instance has an egress policy: %v, %v", p, err)
	}
	cfg.Sandbox = &config.SandboxConfig{Workspace: t.TempDir(), Allow: []string{"198.18.0.1:443"}}
	sb := &hostAgent{inst: inst, cfg: cfg}
	if ip := sb.guestHostAccessIP(); ip != "" {
		t.Fatalf("a sandbox's guest gets host access at %q", ip)
	}
	p, err := sb.egressPolicy()
	if err != nil || p == nil {
		t.Fatalf("sandbox egress policy: %v, %v", p, err)
	}
	if !p.Allows("tcp", netip.MustParseAddrPort("198.18.0.1:443")) || p.Allows("tcp", netip.MustParseAddrPort("198.18.0.7:22")) {
		t.Fatal("the policy does not follow sandbox.allow")
	}
	b, err := os.ReadFile(inst.EgressLogPath())
	if err != nil || !strings.Contains(string(b), "refused tcp 198.18.0.7:22\n") {
		t.Fatalf("egress log: %q, %v", b, err)
	}
}

// A sandbox's secrets: the proxy is built from the host agent's
// environment, the guest is given the sandbox's CA (constrained to the
// secrets' hosts) and not the credential; an unset variable fails the
// start naming it.
func TestSandboxSecretsProxyAndCA(t *testing.T) {
	inst := &store.Instance{Name: "agent", Dir: t.TempDir()}
	cfg := config.Default(config.Host{OS: "linux", Arch: "amd64", CPUs: 2})
	cfg.Sandbox = &config.SandboxConfig{Workspace: t.TempDir(), Secrets: []config.SandboxSecret{{Name: "gh", Env: "VMDOCK_TEST_GH", Host: "api.github.com"}}}
	ha := &hostAgent{inst: inst, cfg: cfg}
	if _, err := ha.secretProxy(); err == nil || !strings.Contains(err.Error(), "VMDOCK_TEST_GH is not set") {
		t.Fatalf("unset variable: %v", err)
	}
	t.Setenv("VMDOCK_TEST_GH", "tok-456")
	p, err := ha.secretProxy()
	if err != nil || p == nil {
		t.Fatalf("secret proxy: %v, %v", p, err)
	}
	var s agent.Setup
	ha.addSandboxCA(&s)
	if len(s.CACerts) != 1 || !strings.Contains(s.CACerts[0], "BEGIN CERTIFICATE") || strings.Contains(strings.Join(s.CACerts, ""), "tok-456") {
		t.Fatalf("guest CA certs: %q", s.CACerts)
	}
	policy, err := cfg.EgressPolicy(nil)
	if err != nil || len(policy.Rules()) != 1 || policy.Rules()[0].String() != "api.github.com:443" {
		t.Fatalf("a secret's host is not allowed on 443: %v %v", policy, err)
	}
}
