package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

// The agent writes containerd's configuration when there is none and
// rewrites its own, but never touches one a user wrote.
func TestWriteContainerdConfig(t *testing.T) {
	sys, _ := guestostest.NewSys(t)
	p := filepath.Join(sys.Root, ContainerdConfig)
	must(t, WriteContainerdConfig(sys))
	b, err := os.ReadFile(p)
	must(t, err)
	if string(b) != ContainerdConfigText || !strings.Contains(string(b), `disabled_plugins = ["io.containerd.grpc.v1.cri"]`) {
		t.Fatalf("written:\n%s", b)
	}

	older := ContainerdConfigMarker + " by an older agent\nversion = 2\n"
	must(t, os.WriteFile(p, []byte(older), 0o644))
	must(t, WriteContainerdConfig(sys))
	if b, _ := os.ReadFile(p); string(b) != ContainerdConfigText {
		t.Fatalf("the agent's own older file kept:\n%s", b)
	}

	mine := "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause:3.9\"\n"
	must(t, os.WriteFile(p, []byte(mine), 0o644))
	must(t, WriteContainerdConfig(sys))
	if b, _ := os.ReadFile(p); string(b) != mine {
		t.Fatalf("a user's configuration was rewritten:\n%s", b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
