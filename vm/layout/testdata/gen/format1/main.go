// Command format1 makes an instance folder with the writers of vmdock
// before the data disk's runtime was recorded (see ../../README.md). It
// is built inside a worktree of that commit, not in this one.
package main

import (
	"fmt"
	"os"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(home string) error {
	h := config.Host{OS: "linux", Arch: "amd64", CPUs: 4, Accel: "kvm", Virtiofsd: "/usr/libexec/virtiofsd"}
	inst, err := store.Open(home, "default")
	if err != nil {
		return err
	}
	if err := inst.Create(); err != nil {
		return err
	}
	// As `vmdock start` did: the defaults, normalized, saved.
	cfg := config.Default(h)
	cfg.Normalize()
	if err := cfg.Save(inst.ConfigPath()); err != nil {
		return err
	}
	// The host agent made the disks as large sparse files; small ones
	// with a marker stand for them here.
	if err := os.WriteFile(inst.DiskPath(), []byte("root disk of format 1\n"), 0o600); err != nil {
		return err
	}
	return os.WriteFile(inst.DataDiskPath(), []byte("data disk of format 1\n"), 0o600)
}
