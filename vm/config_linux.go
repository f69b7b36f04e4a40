package vm

import (
	"runtime"

	"github.com/vmdock/vmdock/vm/qemu"
)

// CurrentHost describes this Linux machine; vz never exists here.
func CurrentHost() Host {
	return Host{OS: "linux", Arch: hostArch, CPUs: runtime.NumCPU(), Virtiofsd: qemu.UsableVirtiofsd()}
}
