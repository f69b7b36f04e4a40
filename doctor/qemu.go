package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

func usesQEMU(f Facts) bool { return f.Config.VMType == driver.TypeQEMU }

// installQEMU is where each OS gets QEMU.
func installQEMU(f Facts) string {
	if f.Host.OS == osDarwin {
		return "`brew install qemu`"
	}
	return "install QEMU: Debian/Ubuntu `sudo apt install qemu-system-x86` (arm64: qemu-system-arm) and qemu-utils; Fedora `sudo dnf install qemu-kvm`"
}

func checkQEMU(ctx context.Context, f Facts) Result {
	r, err := f.QEMU(ctx, f.Config.Arch)
	switch {
	case err != nil && !usesQEMU(f):
		return ok("not usable (%s); only --vm-type qemu needs it", firstLine(strings.SplitN(err.Error(), ":", 2)[0]))
	case err != nil:
		return fail(installQEMU(f), "%v", err)
	case r.TooOld:
		return Result{Status: failIf(usesQEMU(f)), Fix: "update QEMU; " + installQEMU(f),
			Message: fmt.Sprintf("QEMU %s (%s) is older than %s, the oldest vmdock runs", r.Version, r.Binary, r.MinVersion)}
	}
	return ok("QEMU %s (%s)", r.Version, r.Binary)
}

// checkAccel reports what a start's accel auto would run under, from the
// verdict an earlier start cached or a probe boot now.
func checkAccel(ctx context.Context, f Facts) Result {
	if !usesQEMU(f) {
		return ok("vz runs on the Mac's hypervisor: no accelerator to choose")
	}
	if f.Config.Accel == driver.AccelTCG {
		return ok("tcg, as the config asks (accel: tcg): emulation, several times slower than hardware")
	}
	r, err := f.QEMU(ctx, f.Config.Arch)
	if err != nil {
		// A given kvm or hvf that cannot work fails the start; the qemu
		// row says when QEMU is missing.
		if r.Binary != "" {
			return fail("use accel auto (falls back to tcg) or tcg: `vmdock start --accel auto`", "%v", err)
		}
		return warn("see the qemu row", "unknown: no QEMU to probe with")
	}
	when := "probed now"
	if r.FromCache {
		when = "verdict cached " + r.Checked.Local().Format(time.DateTime)
	}
	switch {
	case r.Accel != driver.AccelTCG:
		return ok("%s runs guests here (%s)", r.Accel, when)
	case r.Native == "":
		return warn("", "tcg: %s offers QEMU no hardware accelerator, so guests are emulated (several times slower)", f.Host.OS)
	case f.Config.Arch != f.Host.Arch:
		return warn(fmt.Sprintf("use an %s guest (`--arch %s` on a new profile) and run %s containers with binfmt", f.Host.Arch, f.Host.Arch, f.Config.Arch),
			"tcg: an %s guest on an %s host can only be emulated (several times slower)", f.Config.Arch, f.Host.Arch)
	case r.DeviceError != "":
		return warn(deviceFix(f, r.Native), "tcg: %s", r.Reason)
	}
	return warn(fmt.Sprintf("%s opens but does not run a guest (a nested VM without nested virtualization?): enable it on the outer host, or live with tcg", r.Native),
		"tcg: %s (%s)", r.Reason, when)
}

func deviceFix(f Facts, native string) string {
	if native == driver.AccelHVF {
		return "this Mac offers no Hypervisor.framework (a VM without nested virtualization?): use vz, which macOS 13+ runs"
	}
	return "let this user open /dev/kvm: `sudo usermod -aG kvm $USER` and log in again; or enable virtualization (VT-x/AMD-V) in the firmware"
}

// checkVirtiofsd says whether QEMU mounts get virtiofs or fall back to 9p.
func checkVirtiofsd(ctx context.Context, f Facts) Result {
	switch {
	case !usesQEMU(f):
		return ok("not needed: vz shares folders with its own virtiofs")
	case f.Host.OS != osLinux:
		return ok("not on %s: QEMU mounts use 9p", f.Host.OS)
	case f.Host.Virtiofsd != "":
		out, _ := f.Run(ctx, f.Host.Virtiofsd, "--version")
		if v := firstLine(out); v != "" {
			return ok("%s (%s)", f.Host.Virtiofsd, v)
		}
		return ok("%s", f.Host.Virtiofsd)
	}
	fix := "install the Rust virtiofsd: Debian 13/Ubuntu 24.04 `sudo apt install virtiofsd`, Fedora `sudo dnf install virtiofsd`"
	if f.VirtiofsdFound != "" {
		return warn(fix+" (or run vmdock as root)", "%s is the legacy C daemon, which runs only as root: mounts use 9p, slower for many small files", f.VirtiofsdFound)
	}
	return warn(fix, "none found on PATH, /usr/libexec or /usr/lib/qemu: mounts use 9p, slower for many small files")
}
