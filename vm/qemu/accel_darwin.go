package qemu

import "golang.org/x/sys/unix"

// nativeAccel is hvf when the kernel reports Hypervisor.framework support
// (absent in some nested VMs and on very old Macs), else tcg.
func nativeAccel() string {
	v, err := unix.SysctlUint32("kern.hv_support")
	if err != nil || v != 1 {
		return AccelTCG
	}
	return AccelHVF
}
