package qemu

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/sockpath"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// These tests run the real qemu-system-x86_64, paused (-S) on SeaBIOS with
// no guest, so they need neither an image nor UEFI firmware. The network is
// always restrict=on.

func needQEMU(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts qemu")
	}
	p, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed")
	}
	return p
}

// shortDir is a temp folder with a path short enough for unix sockets.
func shortDir(t *testing.T) string {
	t.Helper()
	d := shortdir.New(t) // unix socket paths are short
	return d
}

func pausedSpec(t *testing.T, dir string) driver.Spec {
	t.Helper()
	disk := filepath.Join(dir, "disk.raw")
	iso := filepath.Join(dir, "boot.iso")
	share := filepath.Join(dir, "share")
	for _, f := range []string{disk, iso} {
		if err := os.WriteFile(f, make([]byte, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(share, 0o755); err != nil {
		t.Fatal(err)
	}
	return driver.Spec{
		Name: "test", Dir: dir, Arch: driver.ArchAMD64, CPUs: 1, MemoryMiB: 128,
		Disks:     []driver.Disk{{Path: disk, Format: "raw"}, {Path: iso, CDROM: true}},
		Shares:    []mounts.Share{{Tag: "s0", HostPath: share, Type: mounts.Type9p}, {Tag: "s1", HostPath: share, ReadOnly: true, Type: mounts.Type9p}},
		Network:   driver.NetworkIsolated,
		SerialLog: filepath.Join(dir, "serial.log"),
	}
}

func pausedDriver() *Driver { return New(Options{pausedBIOS: true}) }

// mustPrepare is d's plan for spec, failing the test when Prepare refuses it.
func mustPrepare(t *testing.T, d *Driver, spec driver.Spec) driver.Plan {
	t.Helper()
	plan, err := d.Prepare(spec)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return plan
}

// prepareAndStart boots spec as the host agent does: Prepare, then Start
// the plan.
func prepareAndStart(ctx context.Context, d *Driver, spec driver.Spec) (driver.Machine, error) {
	plan, err := d.Prepare(spec)
	if err != nil {
		return nil, err
	}
	return d.Start(ctx, plan)
}

func startPaused(t *testing.T, spec driver.Spec) *Machine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mm, err := prepareAndStart(ctx, pausedDriver(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	m := mm.(*Machine)
	t.Cleanup(func() { _ = m.Stop(context.Background(), true) })
	return m
}

func assertCleaned(t *testing.T, dir string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
	pids, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	if left = append(left, pids...); len(left) > 0 {
		t.Errorf("left behind after exit: %q", left)
	}
}

func TestProcessGracefulStopFallsBackToQuit(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	m := startPaused(t, pausedSpec(t, dir))

	info := m.Info()
	if info.Driver != "qemu" || (info.Accel != AccelTCG && info.Accel != AccelKVM) || info.PID <= 0 {
		t.Errorf("Info = %+v", info)
	}
	if b, err := os.ReadFile(PIDFilePath(dir)); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(info.PID) {
		t.Errorf("pid file = %q, %v; want %d", b, err, info.PID)
	}
	st, err := m.QueryStatus(context.Background())
	if err != nil || st != "prelaunch" {
		t.Errorf("QueryStatus = %q, %v; want prelaunch (paused by -S)", st, err)
	}
	// The agent socket listens even though no guest opened the port.
	c, err := m.DialAgent(context.Background())
	if err != nil {
		t.Errorf("DialAgent: %v", err)
	} else {
		c.Close()
	}

	// A paused guest ignores the power button, so Stop must wait for ctx
	// and then quit qemu cleanly (exit 0, not SIGKILL).
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	t0 := time.Now()
	if err := m.Stop(ctx, false); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(t0); d < time.Second || d > 10*time.Second {
		t.Errorf("Stop took %s; want the 1s power-down wait, then quit", d)
	}
	if m.waitErr != nil {
		t.Errorf("qemu exit = %v; want a clean quit", m.waitErr)
	}
	if err := m.Wait(); err != nil {
		t.Errorf("Wait after Stop = %v", err)
	}
	assertCleaned(t, dir)
	if _, err := m.QueryStatus(context.Background()); err == nil {
		t.Error("QueryStatus on a stopped VM did not fail")
	}
	if _, err := m.DialAgent(context.Background()); err == nil {
		t.Error("DialAgent on a stopped VM did not fail")
	}
	log, _ := os.ReadFile(LogPath(dir))
	if !strings.Contains(string(log), "vmdock starting") || !strings.Contains(string(log), "qemu exited: <nil>") {
		t.Errorf("qemu.log lacks start/exit records:\n%s", log)
	}
}

func TestProcessForceStop(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	m := startPaused(t, pausedSpec(t, dir))
	if err := m.Stop(context.Background(), true); err != nil {
		t.Fatalf("Stop(force): %v", err)
	}
	var ee *exec.ExitError
	if !errors.As(m.waitErr, &ee) || !strings.Contains(ee.Error(), "killed") {
		t.Errorf("qemu exit = %v; want killed", m.waitErr)
	}
	if err := m.Wait(); err != nil {
		t.Errorf("Wait after a requested kill = %v", err)
	}
	assertCleaned(t, dir)
}

func TestProcessCrashReportedByWait(t *testing.T) {
	needQEMU(t)
	m := startPaused(t, pausedSpec(t, shortDir(t)))
	_ = m.cmd.Process.Kill() // not through Stop: an unexpected exit
	if err := m.Wait(); err == nil || !strings.Contains(err.Error(), "qemu exited") {
		t.Errorf("Wait after a crash = %v; want an error", err)
	}
}

func TestProcessEarlyFailureQuotesStderr(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	spec := pausedSpec(t, dir)
	// Not a qcow2 image: qemu refuses it while parsing its command line.
	spec.Disks[0].Format = "qcow2"
	_, err := prepareAndStart(context.Background(), pausedDriver(), spec)
	if err == nil {
		t.Fatal("Start did not fail")
	}
	if !strings.Contains(err.Error(), "qemu exited during start") || !strings.Contains(err.Error(), "qcow2") {
		t.Errorf("error lacks qemu's stderr: %v", err)
	}
	t.Logf("early failure: %v", err)
	assertCleaned(t, dir)
}

func TestPrepareRejectsMissingFiles(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	tests := []struct {
		name   string
		mutate func(*driver.Spec)
		want   string
	}{
		{"relative dir", func(s *driver.Spec) { s.Dir = "rel/dir" }, `instance folder "rel/dir": must be an absolute path`},
		{"missing disk", func(s *driver.Spec) { s.Disks[0].Path = "/nonexistent/disk.raw" }, "disk /nonexistent/disk.raw: not a readable file"},
		{"missing kernel", func(s *driver.Spec) { s.Kernel = "/nonexistent/vmlinuz" }, "kernel /nonexistent/vmlinuz"},
		{"share not a folder", func(s *driver.Spec) { s.Shares[0].HostPath = s.Disks[0].Path }, "not a folder"},
		{"socket path too long", func(s *driver.Spec) { s.Dir = "/" + strings.Repeat("d", 100) }, "bytes, longer than the " + strconv.Itoa(sockpath.Max)},
	}
	spec0 := pausedSpec(t, dir)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := spec0
			spec.Disks = append([]driver.Disk(nil), spec0.Disks...)
			spec.Shares = append([]mounts.Share(nil), spec0.Shares...)
			tt.mutate(&spec)
			_, err := pausedDriver().Prepare(spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Prepare = %v; want %q", err, tt.want)
			}
		})
	}
	if _, err := pausedDriver().Prepare(spec0); err != nil {
		t.Errorf("Prepare(good spec) = %v", err)
	}
}

func TestCleanupOrphans(t *testing.T) {
	bin := needQEMU(t)
	dir := shortDir(t)
	spec := pausedSpec(t, dir)

	// A qemu from a "previous host agent": started without Pdeathsig and
	// never stopped.
	args, err := Args(spec, HostEnv{Accel: AccelTCG, pausedBIOS: true})
	if err != nil {
		t.Fatal(err)
	}
	orphan := exec.Command(bin, args...)
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	t.Cleanup(func() { _ = orphan.Process.Kill() })
	waitFor(t, func() bool { _, err := os.Stat(QMPSocketPath(dir)); return err == nil })

	// An unrelated process whose pid sits in a stale virtiofsd pid file
	// (pid reuse) must survive.
	bystander := exec.Command("sleep", "60")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bystander.Process.Kill(); _ = bystander.Wait() })
	if err := os.WriteFile(virtiofsdPIDPath(dir, 0), []byte(strconv.Itoa(bystander.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}

	if err := CleanupOrphans(dir); err != nil {
		t.Fatalf("CleanupOrphans: %v", err)
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Error("orphan exited cleanly; want killed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("orphan qemu still running")
	}
	if cmd, _ := processCmdline(bystander.Process.Pid); !strings.Contains(cmd, "sleep") {
		t.Error("unrelated process was killed")
	}
	assertCleaned(t, dir)

	// A fresh start in the same folder works after the cleanup.
	m := startPaused(t, spec)
	if err := m.Stop(context.Background(), true); err != nil {
		t.Fatal(err)
	}
}

func TestStartCleansUpOrphanFirst(t *testing.T) {
	bin := needQEMU(t)
	dir := shortDir(t)
	spec := pausedSpec(t, dir)
	args, _ := Args(spec, HostEnv{Accel: AccelTCG, pausedBIOS: true})
	orphan := exec.Command(bin, args...)
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = orphan.Wait(); close(exited) }()
	t.Cleanup(func() { _ = orphan.Process.Kill() })
	waitFor(t, func() bool { _, err := os.Stat(PIDFilePath(dir)); return err == nil })

	// Start must end the orphan, which would otherwise keep the disk locked.
	m := startPaused(t, spec)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("orphan survived Start")
	}
	if err := m.Stop(context.Background(), true); err != nil {
		t.Fatal(err)
	}
}

func TestVirtiofsd(t *testing.T) {
	const legacy = "/usr/lib/qemu/virtiofsd"
	needQEMU(t)
	if !fileExists(legacy) {
		t.Skip(legacy + " not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("the legacy virtiofsd needs root")
	}

	t.Run("daemon alone", func(t *testing.T) {
		dir := shortDir(t)
		v, err := DetectVirtiofsd(legacy)
		if err != nil || v.Rust {
			t.Fatalf("DetectVirtiofsd = %+v, %v; want legacy", v, err)
		}
		sock := virtiofsSocketPath(dir, 0)
		d, err := startDaemon(context.Background(), v.Path, v.args(sock, mounts.Share{Tag: "t", HostPath: dir}, true),
			sock, virtiofsdPIDPath(dir, 0), os.Stderr)
		if err != nil {
			if d != nil {
				d.stop()
			}
			t.Fatalf("startDaemon: %v", err)
		}
		if b, _ := os.ReadFile(virtiofsdPIDPath(dir, 0)); strings.TrimSpace(string(b)) != strconv.Itoa(d.cmd.Process.Pid) {
			t.Errorf("pid file = %q", b)
		}
		d.stop()
		assertCleaned(t, dir)
	})

	t.Run("qemu with virtiofs shares", func(t *testing.T) {
		dir := shortDir(t)
		spec := pausedSpec(t, dir)
		allShares(&spec, mounts.TypeVirtiofs)
		m := startPaused(t, spec)
		if len(m.daemons) != 2 {
			t.Fatalf("%d virtiofsd running, want 2", len(m.daemons))
		}
		if st, err := m.QueryStatus(context.Background()); err != nil || st != "prelaunch" {
			t.Errorf("QueryStatus = %q, %v", st, err)
		}
		if err := m.Stop(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		for _, d := range m.daemons {
			select {
			case <-d.done:
			default:
				t.Error("virtiofsd still running after Stop")
			}
		}
		time.Sleep(1500 * time.Millisecond) // past the daemon watch's grace
		if p := m.Info().Problems; len(p) != 0 {
			t.Errorf("virtiofsd ending with qemu counted as a fault: %q", p)
		}
		assertCleaned(t, dir)
	})

	t.Run("a virtiofsd killed while the VM runs shows in Info", func(t *testing.T) {
		dir := shortDir(t)
		spec := pausedSpec(t, dir)
		allShares(&spec, mounts.TypeVirtiofs)
		m := startPaused(t, spec)
		if p := m.Info().Problems; len(p) != 0 {
			t.Fatalf("problems before any fault: %v", p)
		}
		_ = m.daemons[1].cmd.Process.Kill()
		deadline := time.Now().Add(5 * time.Second)
		for len(m.Info().Problems) == 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		p := m.Info().Problems
		if len(p) != 1 || !strings.Contains(p[0], "virtiofsd for "+spec.Shares[1].HostPath+" exited (signal: killed)") {
			t.Fatalf("problems = %q", p)
		}
		if d := m.Info().DeadShares; len(d) != 1 || d[0] != spec.Shares[1].HostPath {
			t.Fatalf("dead shares = %q, want [%s]", d, spec.Shares[1].HostPath)
		}
		if st, err := m.QueryStatus(context.Background()); err != nil || st != "prelaunch" {
			t.Errorf("qemu should run on: QueryStatus = %q, %v", st, err)
		}
	})

	t.Run("daemon failure is reported", func(t *testing.T) {
		dir := shortDir(t)
		spec := pausedSpec(t, dir)
		allShares(&spec, mounts.TypeVirtiofs)
		_, err := prepareAndStart(context.Background(), New(Options{pausedBIOS: true, Virtiofsd: "/bin/false"}), spec)
		if err == nil || !strings.Contains(err.Error(), "virtiofsd for") {
			t.Errorf("Start with a failing virtiofsd = %v", err)
		}
		assertCleaned(t, dir)
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 30s")
}

func TestProcessEFIBoot(t *testing.T) {
	needQEMU(t)
	for _, arch := range []string{driver.ArchAMD64, driver.ArchARM64} {
		t.Run(arch, func(t *testing.T) {
			name, _ := BinaryName(arch)
			bin, err := exec.LookPath(name)
			if err != nil {
				t.Skip(name + " not installed")
			}
			qarch, _ := qemuArch(arch)
			if _, err := findFirmware(qarch, shareDirsFor(bin), fileExists); err != nil {
				t.Skip(err)
			}
			dir := shortDir(t)
			spec := pausedSpec(t, dir)
			spec.Arch = arch
			mm, err := prepareAndStart(context.Background(), New(Options{}), spec)
			if err != nil {
				t.Fatalf("Start with UEFI: %v", err)
			}
			m := mm.(*Machine)
			t.Cleanup(func() { _ = m.Stop(context.Background(), true) })
			if st, err := m.QueryStatus(context.Background()); err != nil || st != "running" {
				t.Errorf("QueryStatus = %q, %v; want running", st, err)
			}
			if _, err := os.Stat(EFIVarsPath(dir)); err != nil {
				t.Errorf("no per-instance EFI vars: %v", err)
			}
			// The firmware prints to the serial console while it looks for
			// a boot disk, which proves -serial reaches Spec.SerialLog.
			waitFor(t, func() bool { st, err := os.Stat(spec.SerialLog); return err == nil && st.Size() > 0 })
			if err := m.Stop(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(EFIVarsPath(dir)); err != nil {
				t.Errorf("EFI vars removed on stop: %v", err)
			}
		})
	}
}

// panicKernel writes a multiboot "kernel" that reports a panic to the
// pvpanic device (I/O port 0x505) and halts: the smallest real guest that
// panics, so the run-state watch is tested against QEMU itself.
func panicKernel(t *testing.T, dir string) string {
	t.Helper()
	const magic, flags, load = 0x1BADB002, 0x00010000, 0x100000
	sum := uint32(magic) + uint32(flags)
	words := []uint32{magic, flags, -sum, load, load, 0, 0, load + 32}
	var img []byte
	for _, w := range words {
		img = append(img, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	// mov dx, 0x505; mov al, 1; out dx, al; hlt; jmp $-1
	img = append(img, 0x66, 0xBA, 0x05, 0x05, 0xB0, 0x01, 0xEE, 0xF4, 0xEB, 0xFD)
	p := filepath.Join(dir, "panic.elf")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGuestPanicEndsTheVMWithTheReason(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	spec := pausedSpec(t, dir)
	spec.Shares = nil
	spec.Kernel = panicKernel(t, dir)
	spec.Accel = AccelTCG
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mm, err := prepareAndStart(ctx, New(Options{}), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	m := mm.(*Machine)
	t.Cleanup(func() { _ = m.Stop(context.Background(), true) })
	start := time.Now()
	werr := make(chan error, 1)
	go func() { werr <- m.Wait() }()
	select {
	case err := <-werr:
		if err == nil || !strings.Contains(err.Error(), "the guest kernel panicked (status guest-panicked)") {
			t.Fatalf("Wait = %v; want the panic named", err)
		}
		t.Logf("reported %.1fs after start: %v", time.Since(start).Seconds(), err)
	case <-time.After(15 * time.Second):
		st, _ := m.QueryStatus(context.Background())
		t.Fatalf("VM still there 15s after a panicking boot (status %q)", st)
	}
}

// Prepare then Start detects the host once: the host agent prepares the
// spec before it records it, and the boot must not run qemu --version,
// the firmware and virtiofsd lookups and the file checks again.
func TestStartUsesThePreparedPlan(t *testing.T) {
	real, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed")
	}
	dir := shortDir(t)
	log := filepath.Join(dir, "runs")
	wrapper := filepath.Join(dir, "qemu-counting")
	script := "#!/bin/sh\n[ \"$1\" = --version ] && echo version >> " + log + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := pausedSpec(t, dir)
	d := New(Options{pausedBIOS: true, Binary: wrapper})
	versionRuns := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "version\n")
	}
	plan := mustPrepare(t, d, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := d.Start(ctx, plan)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = m.Stop(context.Background(), true) })
	if n := versionRuns(); n != 1 {
		t.Fatalf("qemu --version ran %d times for Prepare+Start, want 1", n)
	}
	// Every Prepare checks afresh.
	other := spec
	other.CPUs = 2
	mustPrepare(t, d, other)
	if n := versionRuns(); n != 2 {
		t.Fatalf("qemu --version ran %d times after a second Prepare, want 2", n)
	}
	// A plan this driver did not prepare boots nothing.
	for _, p := range []driver.Plan{{}, driver.NewPlan(spec, "not qemu's")} {
		if m, err := d.Start(ctx, p); err == nil || !strings.Contains(err.Error(), "not made by the qemu driver's Prepare") {
			if m != nil {
				m.Stop(context.Background(), true)
			}
			t.Errorf("Start of a foreign plan = %v; want a refusal", err)
		}
	}
}
