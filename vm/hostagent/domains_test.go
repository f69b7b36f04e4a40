package hostagent

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// freePort is a loopback port nothing listens on (just now).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func portTaken(port int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return true
	}
	ln.Close()
	return false
}

// The domains step hands the config's ports and the profile check to the
// shared router, the port forwarder's yield reaches it, and the undo
// gives the ports and the instance's socket up.
func TestDomainsStepWiresTheSharedRouter(t *testing.T) {
	home := shortdir.New(t)
	inst := &store.Instance{Name: "default", Dir: filepath.Join(home, "default")}
	if err := os.Mkdir(inst.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	httpPort, httpsPort := freePort(t), freePort(t)
	ha := &hostAgent{inst: inst, events: control.NewEventLog(), cfg: config.Config{
		Runtime: config.RuntimeDocker,
		Domains: config.DomainsConfig{Enabled: true, HTTPPort: httpPort, HTTPSPort: httpsPort},
	}}
	if err := ha.stepDomains(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := notes(ha); n != "" {
		t.Fatalf("notes %q, want none", n)
	}
	if !portTaken(httpPort) || !portTaken(httpsPort) {
		t.Fatalf("the router does not hold ports %d and %d", httpPort, httpsPort)
	}
	if _, err := os.Stat(filepath.Join(inst.Dir, "domains.sock")); err != nil {
		t.Errorf("the instance's own router: %v", err)
	}
	giveBack := ha.yieldToPublished(httpPort)
	if giveBack == nil || portTaken(httpPort) {
		t.Fatalf("the router kept port %d from a published port", httpPort)
	}
	giveBack()

	if err := ha.undoDomains(context.Background()); err != nil {
		t.Fatal(err)
	}
	if portTaken(httpPort) || portTaken(httpsPort) {
		t.Error("the router's ports are still held after the undo")
	}
	if _, err := os.Stat(filepath.Join(inst.Dir, "domains.sock")); !os.IsNotExist(err) {
		t.Errorf("the instance's router socket after the undo: %v", err)
	}
	if ha.yieldToPublished(httpPort) != nil {
		t.Error("a yield after the undo reached a router")
	}
}

func TestDomainsStepNotesARuntimeWithoutNames(t *testing.T) {
	ha := &hostAgent{inst: &store.Instance{Name: "default", Dir: shortdir.New(t)}, events: control.NewEventLog(), cfg: config.Config{
		Runtime: "podman",
		Domains: config.DomainsConfig{Enabled: true},
	}}
	if err := ha.stepDomains(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := notes(ha); !strings.Contains(n, "container domains: names for the podman runtime are not built yet") || ha.domains.Load() != nil {
		t.Errorf("notes %q, router %v: want the runtime named and no router", n, ha.domains.Load())
	}
}
