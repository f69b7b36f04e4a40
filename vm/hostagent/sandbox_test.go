package hostagent

import (
	"net/netip"
	"os"
	"strings"
	"testing"

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
