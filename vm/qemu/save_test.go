package qemu

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

func savableSpec(t *testing.T, dir string) driver.Spec {
	spec := pausedSpec(t, dir)
	spec.Shares = nil // QEMU cannot save a VM with shares (SaveBlocker)
	return spec
}

// A real qemu saves its (paused, BIOS-only) VM to a file and a second qemu
// loads it: the pipe, the getfd hand-over and the zstd stream all work.
func TestSaveAndResume(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	spec := savableSpec(t, dir)
	m := startPaused(t, spec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	state := filepath.Join(dir, "vm.state")
	saved, err := m.Save(ctx, state)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	if err := m.Wait(); err != nil {
		t.Fatalf("after a save qemu must have quit cleanly: %v", err)
	}
	fi, err := os.Stat(state)
	if err != nil || fi.Size() != saved.Size || saved.Size == 0 {
		t.Fatalf("state file %v (size %d) vs saved %+v", err, fi.Size(), saved)
	}
	if saved.Format != stateFormat || len(saved.SHA256) != 64 || saved.Accel != AccelTCG && saved.Accel != AccelKVM || saved.Hypervisor == "" {
		t.Fatalf("saved state description %+v", saved)
	}
	rm, err := pausedDriver().Resume(ctx, mustPrepare(t, pausedDriver(), spec), state, saved, saved.Accel)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	defer rm.Stop(context.Background(), true)
	st, err := rm.(*Machine).QueryStatus(ctx)
	if err != nil || st != "prelaunch" {
		t.Fatalf("resumed VM status %q, %v; want the saved VM's prelaunch (-S, never run)", st, err)
	}
}

// A state file cut short is refused by qemu; Resume says so and leaves
// nothing running.
func TestResumeRefusesTruncatedState(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	spec := savableSpec(t, dir)
	m := startPaused(t, spec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	state := filepath.Join(dir, "vm.state")
	saved, err := m.Save(ctx, state)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	if err := os.Truncate(state, saved.Size/2); err != nil {
		t.Fatal(err)
	}
	// The failed resume must leave the disks exactly as the save did: the
	// cold boot that follows relies on it.
	disk := spec.Disks[0].Path
	before, _ := os.ReadFile(disk)
	beforeInfo, _ := os.Stat(disk)
	rm, err := pausedDriver().Resume(ctx, mustPrepare(t, pausedDriver(), spec), state, saved, saved.Accel)
	if err == nil {
		rm.Stop(context.Background(), true)
		t.Fatal("Resume of a truncated state succeeded")
	}
	if _, serr := os.Stat(PIDFilePath(dir)); serr == nil {
		t.Errorf("a qemu pid file is left after the failed resume")
	}
	after, _ := os.ReadFile(disk)
	afterInfo, _ := os.Stat(disk)
	if !bytes.Equal(before, after) || !afterInfo.ModTime().Equal(beforeInfo.ModTime()) {
		t.Errorf("the failed resume changed the disk (mtime %v -> %v)", beforeInfo.ModTime(), afterInfo.ModTime())
	}
	t.Logf("error: %v", err)
}

func TestResumeRefusesOtherQEMUVersion(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	spec := savableSpec(t, dir)
	saved := driver.SavedState{Format: stateFormat, Hypervisor: "1.0.0", Accel: AccelTCG}
	_, err := pausedDriver().Resume(context.Background(), mustPrepare(t, pausedDriver(), spec), filepath.Join(dir, "none"), saved, AccelTCG)
	if err == nil || !strings.Contains(err.Error(), "saved by QEMU 1.0.0") {
		t.Fatalf("want a version refusal, got %v", err)
	}
}

// A state saved from other virtual hardware (an older vmdock without the
// balloon, say) is refused before any qemu starts, so the host agent boots
// cold instead of QEMU failing half-way through the load.
func TestResumeRefusesOtherHardware(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	spec := savableSpec(t, dir)
	env, _, err := pausedDriver().HostEnv(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, hw := range []string{"", "sha256:0000"} {
		saved := driver.SavedState{Format: stateFormat, Hypervisor: env.Version.String(), Accel: AccelTCG, Hardware: hw}
		_, err := pausedDriver().Resume(context.Background(), mustPrepare(t, pausedDriver(), spec), filepath.Join(dir, "none"), saved, AccelTCG)
		if err == nil || !strings.Contains(err.Error(), "virtual hardware changed") {
			t.Fatalf("hardware %q: want a hardware refusal, got %v", hw, err)
		}
		if _, serr := os.Stat(PIDFilePath(dir)); serr == nil {
			t.Fatalf("hardware %q: a qemu pid file after the refusal", hw)
		}
	}
}

// The digest is of the command line without -incoming (the saving and the
// resuming qemu differ only there), and changes with any device.
func TestHardwareDigest(t *testing.T) {
	spec := baseSpec()
	a, err := hardwareDigest(spec, tcgEnv)
	if err != nil || !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Fatalf("digest %q, %v", a, err)
	}
	in := tcgEnv
	in.incoming = true
	if b, _ := hardwareDigest(spec, in); b != a {
		t.Errorf("-incoming changed the digest: %s vs %s", b, a)
	}
	kvm := tcgEnv
	kvm.Accel = AccelKVM
	other := spec
	other.CPUs++
	ka, _ := hardwareDigest(spec, kvm)
	if b, _ := hardwareDigest(other, kvm); b == ka {
		t.Errorf("another CPU count, same digest")
	}
	// Under TCG every guest has one vCPU: the same hardware.
	if b, _ := hardwareDigest(other, tcgEnv); b != a {
		t.Errorf("under TCG another CPU count changed the digest")
	}
	if b, _ := hardwareDigest(spec, kvm); b == a {
		t.Errorf("another accelerator, same digest")
	}
	bad := spec
	bad.Arch = "mips"
	if _, err := hardwareDigest(bad, tcgEnv); err == nil {
		t.Errorf("no error for an arch Args refuses")
	}
}

func TestSaveBlockerNamesTheShare(t *testing.T) {
	spec := driver.Spec{Shares: []mounts.Share{{HostPath: "/home/u", Type: mounts.TypeVirtiofs}}}
	err := New(Options{}).SaveBlocker(spec)
	if err == nil || !strings.Contains(err.Error(), "/home/u") || !strings.Contains(err.Error(), "sync mounts") {
		t.Fatalf("SaveBlocker = %v", err)
	}
	if err := New(Options{}).SaveBlocker(driver.Spec{}); err != nil {
		t.Fatalf("no shares: %v", err)
	}
}

func TestIncomingArgs(t *testing.T) {
	a, _ := incomingArgs(true)
	if strings.Join(a, " ") != "-incoming fd:3" {
		t.Fatalf("incomingArgs = %v", a)
	}
	if a, _ := incomingArgs(false); a != nil {
		t.Fatalf("no incoming: %v", a)
	}
}
