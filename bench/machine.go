package bench

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// HostMachine fills the host half of Machine.
func HostMachine() Machine {
	m := Machine{HostOS: runtime.GOOS, HostArch: runtime.GOARCH, HostCores: runtime.NumCPU()}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		m.HostKernel = unix.ByteSliceToString(u.Release[:])
	}
	return m
}
