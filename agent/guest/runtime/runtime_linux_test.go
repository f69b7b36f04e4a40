package runtime

import (
	"context"
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

// Each group of units starts after the one before, without their unit
// files' ordering; a failing start stops the rest.
func TestStartUnitsNow(t *testing.T) {
	sys, fos := guestostest.NewSys(t)
	must(t, StartUnitsNow(context.Background(), sys.OS, []string{"containerd", "docker.socket"}, []string{"docker.service"}))
	want := "systemctl start --job-mode=ignore-dependencies containerd docker.socket\nsystemctl start --job-mode=ignore-dependencies docker.service"
	if got := fos.Ran(); got != want {
		t.Fatalf("ran:\n%s\nwant:\n%s", got, want)
	}
	sys, fos = guestostest.NewSys(t)
	fos.Results = map[string]error{"systemctl": guestostest.ExitErr(1)}
	if err := StartUnitsNow(context.Background(), sys.OS, []string{"a"}, []string{"b"}); err == nil {
		t.Fatal("a failing start: want an error")
	}
	if got := fos.Ran(); got != "systemctl start --job-mode=ignore-dependencies a" {
		t.Fatalf("ran %q after a failure, want only the first group", got)
	}
}

// StopAll stops both runtimes and their sockets in one go, and a failure
// says what failed.
func TestStopAll(t *testing.T) {
	sys, fos := guestostest.NewSys(t)
	must(t, StopAll(context.Background(), sys.OS))
	if got, want := fos.Ran(), "systemctl stop docker.socket docker.service containerd.service"; got != want {
		t.Fatalf("ran %q, want %q", got, want)
	}
	fos.Results = map[string]error{"systemctl stop": guestostest.ExitErr(1)}
	if err := StopAll(context.Background(), sys.OS); err == nil || !strings.Contains(err.Error(), "stop the container runtimes") {
		t.Fatalf("a failing stop: %v, want it named", err)
	}
}
