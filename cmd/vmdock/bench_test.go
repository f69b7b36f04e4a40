package main

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/bench"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/store"
)

// vz cannot take a disk while the VM runs: the sync section must say so
// instead of asking the host agent; qemu gets the host agent's client.
func TestScratchDisksPerDriver(t *testing.T) {
	inst := &store.Instance{Name: "default", Dir: t.TempDir()}
	s, why := scratchDisks(inst, driver.TypeVZ)
	if s != nil || !strings.Contains(why, "the vz driver cannot attach a disk to a running VM") {
		t.Errorf("vz: %v, %q", s, why)
	}
	s, why = scratchDisks(inst, driver.TypeQEMU)
	if s == nil || why != "" {
		t.Errorf("qemu: %v, %q", s, why)
	}
}

// The bench measures the shares as the guest has them: resolved type and
// mode, and only those at their host path.
func TestBenchShares(t *testing.T) {
	cfg := config.Default(testHost)
	cfg.MountType = mounts.Type9p
	cfg.Mounts = []config.Mount{
		{Location: "/home/u", GuestPath: "/home/u", Writable: true},
		{Location: "/src", GuestPath: "/work", Writable: true},
		{Location: "/data", Type: mounts.TypeVirtiofs},
	}
	got := benchShares(cfg)
	want := []bench.Share{{Path: "/home/u", Type: mounts.Type9p, Writable: true}, {Path: "/data", Type: mounts.TypeVirtiofs}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("benchShares = %+v, want %+v", got, want)
	}
}

// The bench's VM-only modes turn a remote instance down in one line
// instead of booting, timing or comparing a VM it does not have.
func TestBenchRefusesVMModesOnARemoteInstance(t *testing.T) {
	env(t)
	installFake(t)
	if _, err := run("start", "--remote", "ssh://me@build:2222"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--raw-boot"}, {"--resume-cycle"}, {"--versus", "other"}} {
		_, err := run(append([]string{"bench"}, args...)...)
		want := args[0] + `: profile "default" is a remote instance (ssh://me@build:2222) and boots no VM; accepted there: --sections remote`
		if err == nil || err.Error() != want {
			t.Errorf("bench %s: %v; want %q", strings.Join(args, " "), err, want)
		}
	}
	// Nor is a remote instance a VM's --versus.
	if _, err := run("-p", "vm", "start"); err != nil {
		t.Fatal(err)
	}
	home, _ := store.Home()
	self, err := store.Open(home, "vm")
	if err != nil {
		t.Fatal(err)
	}
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	_, err = versusEnv(cmd, &globals{host: testHost}, "default", self)
	want := `--versus default: a remote instance (ssh://me@build:2222) has no VM network to compare; accepted: a running VM profile`
	if err == nil || err.Error() != want {
		t.Errorf("--versus a remote instance: %v; want %q", err, want)
	}
}
