package vz

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/macos"
)

// errNoVirtualization is the start's answer on a Mac that offers vz no
// hypervisor; doctor's os row says the same before a start.
var errNoVirtualization = errors.New("vz: this Mac offers no hardware virtualization (Virtualization.framework reports it unsupported): inside a macOS VM it needs nested virtualization, which M1 and M2 hosts lack; run vmdock on the Mac itself, or start with --vm-type qemu --accel tcg (emulated, slow)")

// checkNestedVirtualization refuses nested virtualization where vz would
// reject it, naming the missing piece: the macOS version first (the chip
// cannot be asked about before 15), then the chip.
func checkNestedVirtualization(host HostInfo, ver macos.Version) error {
	if host.Arch != driver.ArchARM64 {
		return fmt.Errorf("vz: nested virtualization needs Apple silicon (M3 or newer), this host is %s; start without --vz-nested-virtualization", host.Arch)
	}
	if ver.Less(macos.MinNestedVirtualization) {
		return fmt.Errorf("vz: nested virtualization needs macOS %s or newer, this host runs %s; start without --vz-nested-virtualization", macos.MinNestedVirtualization, host.MacOSVersion)
	}
	if !host.NestedVirtualization {
		return errors.New("vz: nested virtualization needs an M3 or newer chip, and this Mac's does not offer it; start without --vz-nested-virtualization")
	}
	return nil
}

// intelPKUWorkaround is the kernel parameter that keeps a 6.12+ guest from
// using memory protection keys, whose XSAVE state vz on Intel before macOS
// 15.5 does not handle (the guest crashes while setting up a signal frame).
const intelPKUWorkaround = "nopku"

// planIntelKernel adds the workaround, and a warning, on an Intel Mac whose
// vz crashes Linux 6.12 and newer. The limit is the macOS version, not the
// kernel alone: the crash needs a kernel built with
// CONFIG_X86_INTEL_MEMORY_PROTECTION_KEYS, which the common distribution
// kernels are, and is gone from macOS 15.5 on. nopku is harmless on older
// kernels and on CPUs without PKU.
func planIntelKernel(p *VMPlan, host HostInfo, ver macos.Version) {
	if host.Arch != driver.ArchAMD64 || !ver.Less(macos.IntelPKUFixed) {
		return
	}
	if p.Boot.Kind == BootLinux {
		p.Boot.Cmdline = appendParam(p.Boot.Cmdline, intelPKUWorkaround)
		p.Warnings = append(p.Warnings, fmt.Sprintf("vz on an Intel Mac before macOS %s crashes Linux 6.12 and newer at boot; this host runs %s, so the guest boots with %s (update macOS to drop it)", macos.IntelPKUFixed, host.MacOSVersion, intelPKUWorkaround))
		return
	}
	p.Warnings = append(p.Warnings, fmt.Sprintf("vz on an Intel Mac before macOS %s crashes Linux 6.12 and newer at boot, and this EFI image's kernel command line cannot be given %s; this host runs %s: update macOS, or use --vm-type qemu if the guest does not start", macos.IntelPKUFixed, intelPKUWorkaround, host.MacOSVersion))
}

// appendParam adds a kernel parameter unless it is there already.
func appendParam(cmdline, param string) string {
	for _, f := range strings.Fields(cmdline) {
		if f == param {
			return cmdline
		}
	}
	if cmdline == "" {
		return param
	}
	return cmdline + " " + param
}
