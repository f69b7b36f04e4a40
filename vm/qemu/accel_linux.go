package qemu

import (
	"os"
)

// nativeAccel is kvm when /dev/kvm can be opened read-write (the device may
// exist without the user being in the kvm group), else tcg.
func nativeAccel() string {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return AccelTCG
	}
	_ = f.Close()
	return AccelKVM
}
