package config

import (
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

// Host is what the config needs to know about the machine vmdock runs on:
// defaults and validation read it, nothing here probes. The command line
// detects it once per process (cmd/vmdock) and passes it down; tests use
// fixed values.
type Host struct {
	OS           string // GOOS
	Arch         string // GOARCH
	MacOSVersion string // "14.5"; empty off macOS
	CPUs         int
	VZ           bool   // Apple Virtualization.framework is usable (macos.VZSupported)
	Accel        string // QEMU's hardware accelerator on this OS (kvm, hvf); empty: none
	Virtiofsd    string // a virtiofsd QEMU can use; empty: none found
	SSHAuthSock  string // SSH_AUTH_SOCK; empty: not set
}

// DefaultVMType is vz where Virtualization.framework works, else qemu.
func (h Host) DefaultVMType() string {
	if h.VZ {
		return driver.TypeVZ
	}
	return driver.TypeQEMU
}

// DefaultMountType is virtiofs on vz, and on qemu when a virtiofsd exists;
// 9p otherwise.
func (h Host) DefaultMountType(vmType string) string {
	if vmType == driver.TypeVZ || h.Virtiofsd != "" {
		return mounts.TypeVirtiofs
	}
	return mounts.Type9p
}
