package qemu

import (
	"errors"

	"golang.org/x/sys/unix"
)

// hostAccel is hvf when the kernel reports Hypervisor.framework support
// (absent in some nested VMs and on very old Macs).
func hostAccel() (string, error) {
	v, err := unix.SysctlUint32("kern.hv_support")
	if err != nil || v != 1 {
		return AccelHVF, errors.New("kern.hv_support is not 1: this Mac offers no Hypervisor.framework")
	}
	return AccelHVF, nil
}

func kernelRelease() string {
	r, err := unix.Sysctl("kern.osrelease")
	if err != nil {
		return "unknown"
	}
	return "darwin " + r
}
