//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestE2EMac boots the vz driver on a real Mac as a user installs it: a
// signed binary outside any checkout, the guest image imported from a file
// built on Linux (VMDOCK_E2E_MAC_IMAGE), one CPU (what a CI Mac spares).
// The macOS workflow runs it; nothing else here boots vz. Set
// VMDOCK_E2E_LOGS to a folder to keep the instance's logs when it fails.
func TestE2EMac(t *testing.T) {
	if os.Getenv("VMDOCK_E2E_MAC") != "1" {
		t.Skip("set VMDOCK_E2E_MAC=1 (and VMDOCK_E2E_MAC_IMAGE) to boot vz on this Mac")
	}
	imageFile := os.Getenv("VMDOCK_E2E_MAC_IMAGE")
	if imageFile == "" {
		t.Fatal("VMDOCK_E2E_MAC_IMAGE: name the vmdock-<arch>.tar.zst to import (a Mac does not build images)")
	}
	// vmdock runs in the test's work folder: a relative path would miss.
	imageFile, err := filepath.Abs(imageFile)
	if err != nil {
		t.Fatal(err)
	}
	// vz runs the host's own arch: the image must be built for it.
	arch := runtime.GOARCH
	e, base := newEnvWithoutImage(t, arch)
	defer e.printTimings()
	keepLogsOnFailure(t, e)
	// macOS's temporary folders live behind the /var -> /private/var link;
	// the share is named by its real path, which is the one the guest
	// mounts and the one docker -v is given.
	real, err := filepath.EvalSymlinks(base)
	if err != nil {
		t.Fatal(err)
	}
	shareDir := filepath.Join(real, "share virtiofs")
	if err := os.MkdirAll(shareDir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.outsideCheckout(t, base)
	e.configure(fmt.Sprintf("vmType: vz\nmountType: virtiofs\nmounts:\n  - location: %q\n    writable: true\n", shareDir))

	e.timed("vmdock image import "+filepath.Base(imageFile), func(t *testing.T) {
		e.run(10*time.Minute, e.vmdock, "image", "import", imageFile)
	})
	startArgs := []string{"start", "--vm-type", "vz", "--cpus", "1", "--memory", "2"}
	e.timed("vmdock start --cpus 1 (vz, cold boot)", func(t *testing.T) {
		e.run(15*time.Minute, e.vmdock, startArgs...)
	})
	e.timed("the imported image is the default start's", func(t *testing.T) {
		checkDefaultImageFrom(t, e, arch, imageFile)
	})
	e.timed("docker load and run the test image", func(t *testing.T) {
		e.docker(5*time.Minute, "load", "-i", e.testTar)
		out := e.docker(5*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "echo", "hello-from-vz")
		if strings.TrimSpace(out) != "hello-from-vz" {
			t.Fatalf("output %q", out)
		}
	})
	checkShareTypes(t, e, []share{{shareDir, shareDir, "virtiofs"}})
	e.timed("bind mount round trip (virtiofs, same path)", func(t *testing.T) {
		checkBindMount(t, e, shareDir)
	})
	checkMacPublishedPort(t, e)
	checkHostAccess(t, e)
	checkMacColdRestart(t, e, startArgs)
	checkMacLoopbackAlias(t, e)
	e.timed("vmdock delete --data", func(t *testing.T) {
		e.run(5*time.Minute, e.vmdock, "stop")
		checkNothingLeft(t, e)
		e.run(time.Minute, e.vmdock, "delete", "--data")
		if _, err := os.Stat(filepath.Join(e.home, "default")); err == nil {
			t.Error("instance folder still there after delete --data")
		}
	})
}

// checkMacPublishedPort: a container's published port answers on the
// host's IPv4 and IPv6 loopback.
func checkMacPublishedPort(t *testing.T, e *env) {
	e.timed("published port answers on 127.0.0.1 and [::1]", func(t *testing.T) {
		e.docker(3*time.Minute, "run", "-d", "--name", "web", "-p", fmt.Sprintf("%d:80", macWebPort), "vmdock-test:latest")
		defer e.docker(3*time.Minute, "rm", "-f", "web")
		waitForTestServer(t, macWebPort, time.Minute)
		url := fmt.Sprintf("http://[::1]:%d/", macWebPort)
		body, err := fetchURL(url, "")
		if err != nil || body != "vmdock-test-ok\n" {
			t.Errorf("GET %s: %q, %v", url, body, err)
		}
	})
}

// checkMacColdRestart: vz has no saved state, so stop then start boots
// cold: what /run held is gone, the data disk (loaded images) is kept.
func checkMacColdRestart(t *testing.T, e *env, startArgs []string) {
	e.timed("vmdock stop, then start boots cold and keeps the data disk", func(t *testing.T) {
		e.run(2*time.Minute, e.vmdock, "ssh", "--", "sh", "-c", "echo before-stop > /run/vmdock-e2e-marker")
		e.run(5*time.Minute, e.vmdock, "stop")
		checkNothingLeft(t, e)
		e.run(15*time.Minute, e.vmdock, startArgs...)
		out, _, _ := e.try(2*time.Minute, e.vmdock, "ssh", "--", "cat", "/run/vmdock-e2e-marker")
		if strings.Contains(out, "before-stop") {
			t.Errorf("/run kept its file across stop and start: not a cold boot")
		}
		images := e.docker(2*time.Minute, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}")
		if !strings.Contains(images, "vmdock-test:latest") {
			t.Fatalf("the loaded image is gone after the restart; images: %q", images)
		}
	})
}

// checkMacLoopbackAlias adds the alias through sudo (passwordless on CI
// Macs), proves a host program can listen on it, and removes it again.
func checkMacLoopbackAlias(t *testing.T, e *env) {
	const ip = "10.254.254.254"
	e.timed("loopback-alias add and remove (sudo)", func(t *testing.T) {
		if _, _, err := e.try(time.Minute, "sudo", "-n", "true"); err != nil {
			t.Fatalf("sudo needs a password here: %v", err)
		}
		e.run(2*time.Minute, e.vmdock, "loopback-alias", "add")
		t.Cleanup(func() { e.try(2*time.Minute, e.vmdock, "loopback-alias", "remove") })
		if out := e.run(time.Minute, e.vmdock, "loopback-alias", "status"); !strings.Contains(out, "present on the loopback") {
			t.Fatalf("after add: %s", out)
		}
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatalf("a host program cannot listen on the alias: %v", err)
		}
		ln.Close()
		e.run(2*time.Minute, e.vmdock, "loopback-alias", "remove")
		if out := e.run(time.Minute, e.vmdock, "loopback-alias", "status"); !strings.Contains(out, "not on the loopback") {
			t.Errorf("after remove: %s", out)
		}
	})
}

// keepLogsOnFailure copies the instance's logs to VMDOCK_E2E_LOGS when the
// test fails: the instance lives in a temporary folder the test removes,
// and CI uploads that folder.
func keepLogsOnFailure(t *testing.T, e *env) {
	dst := os.Getenv("VMDOCK_E2E_LOGS")
	if dst == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Logf("keep logs: %v", err)
			return
		}
		logs, _ := filepath.Glob(filepath.Join(e.home, "*", "*.log"))
		for _, p := range logs {
			name := filepath.Base(filepath.Dir(p)) + "-" + filepath.Base(p)
			if err := copyFile(p, filepath.Join(dst, name), 0o644); err != nil {
				t.Logf("keep %s: %v", p, err)
			}
		}
	})
}
