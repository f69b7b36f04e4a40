//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestE2EArm64 boots the arm64 guest image (the one Apple Silicon users
// get) with the arm64 guest agent. On an x86 machine that is
// qemu-system-aarch64 under TCG, minutes per boot, so it is its own gate
// (`make e2e-arm64`) and one boot serves every check.
func TestE2EArm64(t *testing.T) {
	if os.Getenv("VMDOCK_E2E_ARM64") != "1" {
		t.Skip("set VMDOCK_E2E_ARM64=1 to boot the arm64 image")
	}
	e, _ := newEnv(t, "arm64")
	defer e.printTimings()

	cfgYAML := fmt.Sprintf("arch: arm64\nmountType: 9p\nmounts:\n  - location: %q\n    writable: true\n", e.work)
	e.configure(cfgYAML)

	// Every other lane runs the default gvisor stack; this one keeps QEMU's
	// slirp, which stays selectable, booted for real.
	e.timed("vmdock start --arch arm64 (cold boot to docker ready)", func(t *testing.T) {
		e.run(30*time.Minute, e.vmdock, "start", "--arch", "arm64", "--cpus", "2", "--memory", "2",
			"--network-mode", "isolated", "--network-stack", "slirp", "--image", "vmdock")
	})
	checkRunsOn(e, "slirp", "isolated")
	e.timed("status and docker info say aarch64", func(t *testing.T) {
		if out := e.run(time.Minute, e.vmdock, "status"); !strings.Contains(out, "Running") || !strings.Contains(out, "tcg") {
			t.Errorf("status: %s", out)
		}
		out := e.docker(5*time.Minute, "info", "--format", "{{.Architecture}} {{.KernelVersion}}")
		if !strings.HasPrefix(out, "aarch64 ") || !strings.Contains(out, "arm64") {
			t.Fatalf("docker info: %q, want an aarch64 engine on the arm64 kernel", out)
		}
		t.Logf("guest: %s", strings.TrimSpace(out))
	})
	e.timed("guest agent is the arm64 build", func(t *testing.T) {
		out := e.run(2*time.Minute, e.vmdock, "ssh", "--", "sh", "-c", "uname -m; od -An -tx1 -j18 -N2 /proc/$(pidof vmdock-agent)/exe")
		// ELF e_machine 0xb7 is EM_AARCH64.
		if !strings.Contains(out, "aarch64") || !strings.Contains(out, "b7 00") {
			t.Fatalf("ssh: %q, want an aarch64 guest running an EM_AARCH64 agent", out)
		}
	})
	e.timed("docker load and run the arm64 test image", func(t *testing.T) {
		e.docker(10*time.Minute, "load", "-i", e.testTar)
		out := e.docker(10*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "uname", "-m")
		if strings.TrimSpace(out) != "aarch64" {
			t.Fatalf("container says %q", out)
		}
	})
	e.timed("bind mount round trip (9p)", func(t *testing.T) {
		checkBindMount(t, e, e.work)
	})
	e.timed("published port answers on the host", func(t *testing.T) {
		e.docker(5*time.Minute, "run", "-d", "--name", "web", "-p", fmt.Sprintf("%d:80", arm64WebPort), "vmdock-test:latest")
		waitForTestServer(t, arm64WebPort, time.Minute)
		e.docker(5*time.Minute, "rm", "-f", "web")
	})
	e.timed("vmdock stop", func(t *testing.T) {
		e.run(5*time.Minute, e.vmdock, "stop")
		checkNothingLeft(t, e)
	})
}
