package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/macos"
)

// GOOS values the checks tell apart; Facts.Host.OS is one of them.
const (
	osDarwin = "darwin"
	osLinux  = "linux"
)

// virtualizationFramework is the first macOS with Virtualization.framework
// at all; vmdock's own floor (macos.MinVZ) is higher.
var virtualizationFramework = macos.Version{Major: 11}

// rosettaRuntime is what `softwareupdate --install-rosetta` installs; vz
// reports Rosetta for Linux available exactly when it is there.
const rosettaRuntime = "/Library/Apple/usr/libexec/oah/libRosettaRuntime"

var upgradeOrQEMU = "update macOS to " + macos.MinVZ.String() + " or newer, or run on QEMU: `brew install qemu`, then `vmdock start --vm-type qemu`"

// usesVZ: problems that only stop vz fail when the start would use vz, and
// only warn otherwise.
func usesVZ(f Facts) bool { return f.Config.VMType == driver.TypeVZ }

func checkOS(_ context.Context, f Facts) Result {
	switch f.Host.OS {
	case osLinux:
		return ok("Linux %s on %s; vmdock runs VMs with QEMU here", f.Kernel, f.Host.Arch)
	case osDarwin:
		return checkMacOS(f)
	}
	return fail("use a Mac (macOS 13+) or Linux", "%s on %s: vmdock runs on macOS and Linux only", f.Host.OS, f.Host.Arch)
}

// checkMacOS holds the version against every gate vz has, so the one line
// says what this Mac can and cannot do.
func checkMacOS(f Facts) Result {
	v, err := macos.Parse(f.Host.MacOSVersion)
	if err != nil {
		return fail("report this output at the vmdock issue tracker", "macOS on %s: %v", f.Host.Arch, err)
	}
	mac := fmt.Sprintf("macOS %s on %s", f.Host.MacOSVersion, f.Host.Arch)
	switch {
	case v.Less(virtualizationFramework):
		return fail(upgradeOrQEMU, "%s: Virtualization.framework needs macOS %s and vmdock's vz driver macOS %s", mac, virtualizationFramework, macos.MinVZ)
	case v.Less(macos.MinVZ):
		return fail(upgradeOrQEMU, "%s: vmdock's vz driver needs macOS %s (EFI boot, Rosetta share, machine identity)", mac, macos.MinVZ)
	}
	if noVirtualization(f) {
		return Result{Status: failIf(usesVZ(f)), Fix: noVirtualizationFix,
			Message: mac + ": Virtualization.framework reports no hardware virtualization, so vz cannot start a VM here (a macOS VM without nested virtualization, as on M1/M2 hosts and GitHub's macOS runners?)"}
	}
	notes := []string{fmt.Sprintf("vz ok (needs %s)", macos.MinVZ)}
	if f.Host.Arch == driver.ArchARM64 {
		notes = append(notes, "Rosetta for Linux possible")
		if v.Less(macos.MinNestedVirtualization) {
			notes = append(notes, fmt.Sprintf("nested virtualization needs macOS %s and an M3 or newer", macos.MinNestedVirtualization))
		} else {
			notes = append(notes, "nested virtualization if the chip is an M3 or newer")
		}
	} else if v.Less(macos.IntelPKUFixed) {
		return warn(fmt.Sprintf("update macOS to %s or newer; if a guest does not boot, `vmdock start --vm-type qemu`", macos.IntelPKUFixed),
			"%s: vz on an Intel Mac before macOS %s crashes Linux 6.12 and newer at boot; vmdock works around it where it can", mac, macos.IntelPKUFixed)
	}
	return ok("%s: %s", mac, strings.Join(notes, "; "))
}

const noVirtualizationFix = "run vmdock on the Mac itself, or in a macOS VM whose host offers nested virtualization; here only `vmdock start --vm-type qemu --accel tcg` runs (emulated, slow)"

// noVirtualization: the framework answered, and said no.
func noVirtualization(f Facts) bool {
	if f.VirtualizationSupported == nil {
		return false
	}
	supported, err := f.VirtualizationSupported()
	return err == nil && !supported
}

// signFix is the one fix for a binary vz refuses; vm/vz says the same
// when a start hits it.
func signFix(exe string) string {
	return fmt.Sprintf("`make build` signs bin/vmdock; for this binary run `codesign --entitlements hack/vz.entitlements --force -s - %s` from a vmdock checkout", exe)
}

// entitlement is what vz requires the process to be signed with
// (hack/vz.entitlements).
const entitlement = "com.apple.security.virtualization"

func checkSignature(ctx context.Context, f Facts) Result {
	if f.Host.OS != osDarwin {
		return ok("not needed on %s (only vz checks it)", f.Host.OS)
	}
	if f.Executable == "" {
		return warn("run vmdock by its path", "cannot tell which file this vmdock runs from")
	}
	// codesign prints the entitlements plist on stdout and its complaints
	// ("code object is not signed at all") on stderr; Run returns both.
	out, err := f.Run(ctx, "codesign", "-d", "--entitlements", "-", f.Executable)
	switch {
	case strings.Contains(out, entitlement):
		return ok("%s is signed with %s", f.Executable, entitlement)
	case strings.Contains(out, "not signed"):
		return Result{Status: failIf(usesVZ(f)), Fix: signFix(f.Executable),
			Message: fmt.Sprintf("%s is not signed, so vz refuses to start a VM (built with `go build` or `go install`?)", f.Executable)}
	case err != nil && strings.TrimSpace(out) == "":
		return warn("run `codesign -d --entitlements - "+f.Executable+"` and look for "+entitlement, "cannot check the signature: %v", err)
	}
	return Result{Status: failIf(usesVZ(f)), Fix: signFix(f.Executable),
		Message: fmt.Sprintf("%s is signed without the %s entitlement, so vz refuses to start a VM", f.Executable, entitlement)}
}

func checkCgo(_ context.Context, f Facts) Result {
	built := "without cgo"
	if f.CGO {
		built = "with cgo"
	}
	if f.Host.OS != osDarwin {
		return ok("built %s; %s needs none", built, f.Host.OS)
	}
	if f.CGO {
		return ok("built with cgo, which vz needs to reach Virtualization.framework")
	}
	return Result{Status: failIf(usesVZ(f)), Fix: "rebuild with cgo: `make build` (CGO_ENABLED=1, Xcode command line tools), or `vmdock start --vm-type qemu`",
		Message: "built with CGO_ENABLED=0: vz cannot reach Virtualization.framework without cgo"}
}

func checkRosetta(_ context.Context, f Facts) Result {
	switch {
	case f.Host.OS != osDarwin:
		return ok("not on %s (a vz feature); amd64 containers run under QEMU emulation in the guest", f.Host.OS)
	case f.Host.Arch != driver.ArchARM64:
		return ok("not on an Intel Mac (Apple silicon only); amd64 containers run natively")
	}
	if v, err := macos.Parse(f.Host.MacOSVersion); err != nil || v.Less(macos.MinVZ) {
		return warn(upgradeOrQEMU, "Rosetta for Linux needs macOS %s (this Mac runs %q)", macos.MinVZ, f.Host.MacOSVersion)
	}
	if f.Exists(rosettaRuntime) {
		return ok("installed; `vmdock start --vz-rosetta` runs amd64 containers with it")
	}
	fix := "`softwareupdate --install-rosetta --agree-to-license` (or start with --vz-rosetta from a terminal to be asked)"
	if f.Config.VZRosetta {
		return warn(fix, "not installed, and this instance's config asks for it (vzRosetta: true)")
	}
	return warn(fix, "not installed: amd64 containers run under QEMU emulation, slower than Rosetta")
}
