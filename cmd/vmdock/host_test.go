package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/macos"
	"github.com/vmdock/vmdock/vm/qemu"
	"github.com/vmdock/vmdock/vm/store"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// testHost is the fixed machine the CLI tests run on: Linux without vz or
// a virtiofsd, whatever the machine running the tests has.
var testHost = config.Host{OS: "linux", Arch: runtime.GOARCH, CPUs: 4, Accel: "kvm"}

func TestDetectHost(t *testing.T) {
	h := detectHost()
	if h.OS != runtime.GOOS || h.Arch != runtime.GOARCH || h.CPUs != runtime.NumCPU() || h.CPUs < 1 {
		t.Errorf("detectHost = %+v", h)
	}
	if h.VZ != macos.VZSupported(h.MacOSVersion) {
		t.Errorf("VZ %v but macOS %q", h.VZ, h.MacOSVersion)
	}
}

// TestProbeCountHelper is not a test: it is the vmdock command line (with
// the VM lifecycle faked) as a process of its own, so the probes it makes
// can be counted from a fresh start.
func TestProbeCountHelper(t *testing.T) {
	args := os.Getenv("VMDOCK_TEST_PROBE_ARGS")
	if args == "" {
		t.Skip("helper process only")
	}
	installFake(t)
	root := newRootCmd(detectHost())
	root.SetArgs(strings.Fields(args))
	os.Exit(exitCode(root.Execute(), os.Stderr))
}

// Each vmdock process runs `virtiofsd --help` at most once, whatever the
// command: `start` used to run it three times, `version` once.
func TestVirtiofsdProbedOncePerCommand(t *testing.T) {
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "runs")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\necho 'Usage: virtiofsd [OPTIONS] --shared-dir <SHARED_DIR>'\n"
	if err := os.WriteFile(filepath.Join(bin, "virtiofsd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	home, user := filepath.Join(shortdir.New(t), "home"), t.TempDir()
	for _, args := range []string{"version", "start --network-mode isolated", "status", "start --network-mode isolated --vm-type qemu"} {
		os.Remove(log)
		cmd := exec.Command(os.Args[0], "-test.run=^TestProbeCountHelper$")
		cmd.Env = append(os.Environ(), "VMDOCK_TEST_PROBE_ARGS="+args, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
			store.HomeEnv+"="+home, "HOME="+user, "DOCKER_CONFIG="+t.TempDir(), ProfileEnv+"=")
		out, err := cmd.CombinedOutput()
		if err != nil && !strings.HasPrefix(args, "status") {
			t.Fatalf("vmdock %s: %v\n%s", args, err, out)
		}
		b, _ := os.ReadFile(log)
		if n := strings.Count(string(b), "--help"); n != 1 {
			t.Errorf("vmdock %s ran virtiofsd --help %d times, want 1", args, n)
		}
	}
	// The fake daemon was usable, so the new instance shares by virtiofs.
	cfg, err := config.Load(filepath.Join(home, "default", "vmdock.yaml"), testHost)
	if err != nil || cfg.MountType != "virtiofs" {
		t.Errorf("saved mount type %q, %v; want virtiofs from the detected daemon", cfg.MountType, err)
	}
}

// Stop and start end the VM processes a dead host agent left: `vmdock
// stop` of an instance whose host agent is gone clears the QEMU leftovers
// (pid file, QMP socket) in its folder, through the QEMU cleanup this
// command wires into the instance layer.
func TestInstancesEndQEMUOrphans(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	stopVM = instance.Stop
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "default")
	left := []string{qemu.PIDFilePath(dir), qemu.QMPSocketPath(dir)}
	for _, p := range left {
		if err := os.WriteFile(p, []byte("garbage\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run("stop"); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	for _, p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after stop: %v", p, err)
		}
	}
}
