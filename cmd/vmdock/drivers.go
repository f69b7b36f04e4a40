package main

import (
	"github.com/vmdock/vmdock/bench/scratch"
	"github.com/vmdock/vmdock/doctor"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/qemu"
	"github.com/vmdock/vmdock/vm/vz"
)

// Below the command line only the host agent links the VM drivers; what
// the other packages need of them is handed down from here.

// The scratch route finds the machine it hot-plugs into by asking for a
// scratch.Machine: QEMU's is one (vz's cannot hot-plug), which neither
// package can say itself, bench and vm/qemu not knowing each other.
var _ scratch.Machine = (*qemu.Machine)(nil)

// init wires the QEMU driver's orphan cleanup into every command that
// starts or stops an instance (and into the CLI tests, which do not go
// through main).
func init() {
	instance.EndOrphans = qemu.CleanupOrphans
}

// addDriverFacts gives doctor what only the drivers know: QEMU's virtiofsd
// found and accelerator report, and whether vz's framework runs VMs on
// this Mac. The report uses the host agent's verdict cache, so doctor
// reads the verdict a start left and a start reads the one doctor probed.
func addDriverFacts(f *doctor.Facts) {
	f.VirtiofsdFound = qemu.Capabilities().Virtiofsd.Path
	f.QEMU = qemu.New(qemu.Options{CacheDir: f.CacheDir}).ReportAccel
	f.VirtualizationSupported = vz.VirtualizationSupported
}
