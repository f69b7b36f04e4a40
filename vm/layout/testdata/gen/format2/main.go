// Command format2 makes an instance folder with the writers of vmdock
// before the network stack was recorded (see ../../README.md): the data
// disk's runtime, the image pin and a saved VM state. It is built inside
// a worktree of that commit, not in this one.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/resume"
	"github.com/vmdock/vmdock/vm/store"
)

func main() {
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(home, version string) error {
	h := config.Host{OS: "linux", Arch: "amd64", CPUs: 4, Accel: "kvm", Virtiofsd: "/usr/libexec/virtiofsd"}
	inst, err := store.Open(home, "default")
	if err != nil {
		return err
	}
	if err := inst.Create(); err != nil {
		return err
	}
	cfg := config.Default(h)
	cfg.Normalize()
	if err := cfg.Save(inst.ConfigPath()); err != nil {
		return err
	}
	if err := inst.RecordDataRuntime(cfg.Runtime); err != nil {
		return err
	}
	if err := os.WriteFile(inst.DiskPath(), []byte("root disk of format 2\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(inst.DataDiskPath(), []byte("data disk of format 2\n"), 0o600); err != nil {
		return err
	}
	// The host agent's image step pinned the image like this.
	if err := atomicfile.WriteFile(filepath.Join(inst.Dir, images.DigestFileName), []byte("sha256:"+strings.Repeat("2", 64)+"\n"), 0o600); err != nil {
		return err
	}
	return saveState(inst, cfg, version)
}

// saveState writes a saved VM state as `vmdock stop` did: the state file,
// then its record with the fingerprint of the VM it came from.
func saveState(inst *store.Instance, cfg config.Config, version string) error {
	dir := inst.SavedStateDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.Create(resume.StatePath(dir))
	if err != nil {
		return err
	}
	hw := &resume.HashingWriter{W: f}
	if _, err := hw.Write([]byte("guest memory of format 2\n")); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fp := resume.Fingerprint{Vmdock: version, Agent: "sha256:" + strings.Repeat("a", 64), Image: "sha256:" + strings.Repeat("2", 64),
		Driver: cfg.VMType, Hypervisor: "8.2.2", Accel: "kvm", Arch: cfg.Arch, CPUs: cfg.CPUs, MemoryMiB: int(cfg.MemoryGiB * 1024),
		DiskGiB: cfg.DiskGiB, Network: cfg.Network.Mode, DiskSync: cfg.DiskSync, Runtime: cfg.Runtime,
		Disks: resume.MarkDisks(inst.DiskPath(), inst.DataDiskPath())}
	st := driver.SavedState{Format: "qemu-migration+zstd", Size: hw.Size(), SHA256: hw.SHA256(), Hypervisor: "8.2.2", Accel: "kvm", Hardware: strings.Repeat("b", 64)}
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	return (&resume.Saved{Fingerprint: fp, State: st, At: at, Took: 1500 * time.Millisecond}).Write(dir)
}
