package main

import (
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm"
)

// vz cannot take a disk while the VM runs: the sync section must say so
// instead of asking the host agent; qemu gets the host agent's client.
func TestScratchDisksPerDriver(t *testing.T) {
	inst := &vm.Instance{Name: "default", Dir: t.TempDir()}
	s, why := scratchDisks(inst, "vz")
	if s != nil || !strings.Contains(why, "the vz driver cannot attach a disk to a running VM") {
		t.Errorf("vz: %v, %q", s, why)
	}
	s, why = scratchDisks(inst, "qemu")
	if s == nil || why != "" {
		t.Errorf("qemu: %v, %q", s, why)
	}
}
