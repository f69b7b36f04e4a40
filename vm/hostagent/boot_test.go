package hostagent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/network/usernet"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/store"
)

// A bare disk's root is in a partition the agent cannot grow: asking it
// would do nothing for ext4 and fail the setup step for anything else.
func TestGuestSetupGrowsTheRootOfVMDockImagesOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		img  *images.Image
		want bool
	}{
		{"vmdock image", &images.Image{Kind: images.KindVMDock, Kernel: "/c/vmlinuz", Initrd: "/c/initrd.img"}, true},
		{"bare qcow2", &images.Image{Kind: images.KindQCOW2}, false},
		{"bare raw", &images.Image{Kind: images.KindRaw}, false},
		{"no image yet", nil, false},
	} {
		ha := &hostAgent{inst: &store.Instance{Name: "default"}, boot: bootResults{img: tc.img}}
		if got := ha.guestSetup().GrowRoot; got != tc.want {
			t.Errorf("%s: GrowRoot %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The guest is told to find its disks by serial: the spec gives root and
// data theirs, the data disk is named by its link with the old name as
// the fallback, and root= names the link only for an image whose
// initramfs makes it.
func TestDisksAreFoundBySerial(t *testing.T) {
	ha := &hostAgent{inst: &store.Instance{Name: "x", Dir: "/vmdock/x"},
		cfg: config.Config{Arch: driver.ArchAMD64, VMType: driver.TypeQEMU, CPUs: 1, MemoryGiB: 1}}
	withUdev := &images.Manifest{Packages: map[string]string{"udev": "252.30", "initramfs-tools": "0.142", "systemd": "252.30"}}
	tests := []struct {
		name     string
		img      *images.Image
		wantRoot string
	}{
		{"an image whose initramfs has udev", &images.Image{Kind: images.KindVMDock, Kernel: "/k", Cmdline: "root=/dev/vda rw console=ttyS0", Manifest: withUdev},
			"root=/dev/disk/by-id/virtio-vmdock-root rw console=ttyS0"},
		{"an image that does not say", &images.Image{Kind: images.KindVMDock, Kernel: "/k", Cmdline: "root=/dev/vda rw console=ttyS0", Manifest: &images.Manifest{Packages: map[string]string{"systemd": "252.30"}}},
			"root=/dev/vda rw console=ttyS0"},
		{"root given another way", &images.Image{Kind: images.KindVMDock, Kernel: "/k", Cmdline: "root=LABEL=vmdock rw", Manifest: withUdev},
			"root=LABEL=vmdock rw"},
		{"a bare disk", &images.Image{Kind: images.KindRaw}, ""},
	}
	for _, tt := range tests {
		spec, err := ha.buildSpec(tt.img)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Cmdline != tt.wantRoot {
			t.Errorf("%s: cmdline %q, want %q", tt.name, spec.Cmdline, tt.wantRoot)
		}
		if spec.Disks[0].Serial != "vmdock-root" || spec.Disks[1].Serial != "vmdock-data" || spec.Disks[2].Serial != "vmdock-cidata" {
			t.Errorf("%s: disk serials %+v, want root, data and cidata (prepare-agent finds the boot disk by it in sysfs)", tt.name, spec.Disks)
		}
	}
	s := ha.guestSetup()
	if s.DataDisk != "/dev/disk/by-id/virtio-vmdock-data" || s.DataDiskFallback != "/dev/vdb" {
		t.Errorf("setup data disk %q (fallback %q), want its by-id link, then /dev/vdb", s.DataDisk, s.DataDiskFallback)
	}
}

// On the gvisor stack the spec gives the NIC the MAC the stack leases the
// guest's address to; on a driver's own network the driver picks.
func TestSpecNetMACIsTheStacks(t *testing.T) {
	for stack, want := range map[string]string{driver.NetStackGvisor: usernet.GuestMAC, driver.NetStackSlirp: ""} {
		ha := &hostAgent{inst: &store.Instance{Name: "x", Dir: "/vmdock/x"},
			cfg: config.Config{Arch: driver.ArchAMD64, VMType: driver.TypeQEMU, CPUs: 1, MemoryGiB: 1, Network: config.NetworkConfig{Stack: stack}}}
		spec, err := ha.buildSpec(&images.Image{Kernel: "/k"})
		if err != nil {
			t.Fatal(err)
		}
		if spec.NetMAC != want {
			t.Errorf("stack %s: NetMAC %q, want %q", stack, spec.NetMAC, want)
		}
	}
}

// QEMU guests talk over virtio-serial, vz guests over vsock: the boot
// disk tells the guest agent which.
func TestChannelForEachDriver(t *testing.T) {
	for vmType, want := range map[string]string{driver.TypeQEMU: agent.ChannelVirtioSerial, driver.TypeVZ: agent.ChannelVsock} {
		if got := channelFor(vmType); got != want {
			t.Errorf("channelFor(%s) = %s, want %s", vmType, got, want)
		}
	}
}

// The pid file holds this process; a broken boot leaves its reason for
// status; removing a marker that is gone is no error, one that cannot go
// names itself.
func TestInstanceFilesOfARun(t *testing.T) {
	inst := &store.Instance{Name: "x", Dir: t.TempDir()}
	if err := writePID(inst.PIDPath()); err != nil {
		t.Fatal(err)
	}
	if pid, err := store.ReadPID(inst.PIDPath()); err != nil || pid != os.Getpid() {
		t.Errorf("pid file: %d, %v; want %d", pid, err, os.Getpid())
	}
	if err := writePID(filepath.Join(inst.Dir, "missing", "ha.pid")); err == nil || !strings.Contains(err.Error(), "write pid file") {
		t.Errorf("pid file in a missing folder: %v", err)
	}
	markBroken(inst, "the VM exited unexpectedly")
	if b, _ := os.ReadFile(inst.BrokenPath()); string(b) != "the VM exited unexpectedly\n" {
		t.Errorf("broken marker %q", b)
	}
	if !fileExists(inst.BrokenPath()) || fileExists(inst.UpgradeImagePath()) {
		t.Error("fileExists disagrees with the folder")
	}
	if err := removeIfExists(inst.UpgradeImagePath()); err != nil {
		t.Errorf("removing a marker that is not there: %v", err)
	}
	busy := filepath.Join(inst.Dir, "busy")
	if err := os.MkdirAll(filepath.Join(busy, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := removeIfExists(busy); err == nil || !strings.Contains(err.Error(), busy) {
		t.Errorf("removing a non-empty folder: %v, want an error naming it", err)
	}
}

// The follower of the agent's journal waits for journald's files (the
// agent starts before journald) and copies the whole boot on the first
// session, only the last lines on a later one.
func TestGuestLogFollowerWaitsForTheJournal(t *testing.T) {
	first, later := guestLogFollower(true), guestLogFollower(false)
	if len(first) != 3 || first[0] != "sh" || first[1] != "-c" {
		t.Fatalf("follower %q, want sh -c SCRIPT", first)
	}
	for _, want := range []string{"/run/log/journal/*/system.journal", "exec journalctl -b -u vmdock-agent -f --no-tail"} {
		if !strings.Contains(first[2], want) {
			t.Errorf("first session's script lacks %q:\n%s", want, first[2])
		}
	}
	if !strings.Contains(later[2], "-f -n 10 ") || strings.Contains(later[2], "--no-tail") {
		t.Errorf("a later session copies the whole journal again:\n%s", later[2])
	}
	// The script itself: with no journal it gives up waiting after its
	// rounds and runs journalctl (here a stand-in on PATH).
	dir := t.TempDir()
	fake := filepath.Join(dir, "journalctl")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho journalctl \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := strings.Replace(first[2], "i -lt 100", "i -lt 2", 1)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "journalctl -b -u vmdock-agent -f --no-tail -o short-iso --no-pager") {
		t.Errorf("script ran %q, %v", out, err)
	}
}

// The boot's first journal follower waits for the boot to end, ready or
// failed, so its journalctl does not take CPU from the boot.
func TestGuestLogFollowerWaitsForTheBootToEnd(t *testing.T) {
	ha := &hostAgent{run: runState{phase: control.PhaseStarting}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if ha.waitBootOver(ctx) {
		t.Fatal("waitBootOver returned during the boot")
	}
	for _, p := range []string{control.PhaseRunning, control.PhaseStopping} {
		ha.setPhase(p)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if !ha.waitBootOver(ctx) {
			t.Errorf("phase %s: still waiting", p)
		}
		cancel()
	}
}
