package vm

import (
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CurrentHost describes this Mac: vz needs macOS 13 (Ventura) or later for
// the features vmdock uses (virtiofs, Rosetta, EFI).
func CurrentHost() Host {
	h := Host{OS: "darwin", Arch: hostArch, CPUs: runtime.NumCPU(), VZ: macOSMajor() >= 13}
	if p, err := exec.LookPath("virtiofsd"); err == nil {
		h.Virtiofsd = p
	}
	return h
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
