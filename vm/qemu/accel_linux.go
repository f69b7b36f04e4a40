package qemu

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// kvmDevice is the device KVM is reached through.
const kvmDevice = "/dev/kvm"

// hostAccel names the hardware accelerator this OS offers and whether its
// device can be opened. An open device proves nothing about whether it runs
// a guest (a nested kvm_pvm opens fine and then aborts QEMU): the probe
// decides that.
func hostAccel() (string, error) { return AccelKVM, openRW(kvmDevice) }

func openRW(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// kernelRelease identifies the host kernel for the accelerator verdict
// cache: a kernel update can fix (or break) KVM.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%s %s", unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:]))
}
