package qemu

import (
	"runtime"

	"github.com/vmdock/vmdock/vm/driver"
)

// hostArch is the GOARCH-style arch of this host; hardware acceleration is
// only possible when the guest arch matches it.
func hostArch() string { return runtime.GOARCH }

// detectAccel picks the fastest accelerator for arch on this host; a
// foreign arch always runs under TCG.
func detectAccel(arch string) string {
	if arch != hostArch() || (arch != driver.ArchAMD64 && arch != driver.ArchARM64) {
		return AccelTCG
	}
	return nativeAccel()
}
