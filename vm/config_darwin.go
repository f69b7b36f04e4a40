package vm

import (
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/vm/qemu"
)

// CurrentHost describes this Mac: vz needs macOS 13 (Ventura) or later for
// the features vmdock uses (virtiofs, Rosetta, EFI).
func CurrentHost() Host {
	// QEMU on macOS has no virtiofsd (vhost-user needs Linux), so qemu
	// instances there use 9p; vz has virtiofs built in.
	return Host{OS: "darwin", Arch: hostArch, CPUs: runtime.NumCPU(), VZ: macOSMajor() >= 13, Virtiofsd: qemu.UsableVirtiofsd()}
}

func macOSMajor() int {
	v, err := unix.Sysctl("kern.osproductversion")
	if err != nil {
		return 0
	}
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0
	}
	return n
}
