package qemu

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// firmwarePair is one known location of a UEFI code image and its vars
// template. Secure-boot builds are left out on purpose: they need SMM
// emulation and a secure pflash, which buys a dev VM nothing.
type firmwarePair struct{ code, vars string }

// firmwareCandidates lists where distributions and Homebrew install EDK2
// for a QEMU arch. shareDirs are QEMU data folders (<prefix>/share/qemu)
// derived from the binary's location, searched first.
func firmwareCandidates(arch string, shareDirs []string) []firmwarePair {
	var out []firmwarePair
	switch arch {
	case "x86_64":
		for _, d := range shareDirs {
			out = append(out, firmwarePair{filepath.Join(d, "edk2-x86_64-code.fd"), filepath.Join(d, "edk2-i386-vars.fd")})
		}
		out = append(out,
			firmwarePair{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"}, // Debian/Ubuntu
			firmwarePair{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"},
			firmwarePair{"/usr/share/edk2/ovmf/OVMF_CODE.fd", "/usr/share/edk2/ovmf/OVMF_VARS.fd"},                     // Fedora
			firmwarePair{"/usr/share/edk2/x64/OVMF_CODE.4m.fd", "/usr/share/edk2/x64/OVMF_VARS.4m.fd"},                 // Arch
			firmwarePair{"/usr/share/qemu/edk2-x86_64-code.fd", "/usr/share/qemu/edk2-i386-vars.fd"},                   // upstream install
			firmwarePair{"/opt/homebrew/share/qemu/edk2-x86_64-code.fd", "/opt/homebrew/share/qemu/edk2-i386-vars.fd"}, // Homebrew arm64
			firmwarePair{"/usr/local/share/qemu/edk2-x86_64-code.fd", "/usr/local/share/qemu/edk2-i386-vars.fd"},       // Homebrew x86
		)
	case "aarch64":
		for _, d := range shareDirs {
			out = append(out, firmwarePair{filepath.Join(d, "edk2-aarch64-code.fd"), filepath.Join(d, "edk2-arm-vars.fd")})
		}
		out = append(out,
			firmwarePair{"/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd"},                                // Debian/Ubuntu
			firmwarePair{"/usr/share/edk2/aarch64/QEMU_EFI-pflash.raw", "/usr/share/edk2/aarch64/vars-template-pflash.raw"}, // Fedora
			firmwarePair{"/usr/share/edk2/aarch64/QEMU_CODE.fd", "/usr/share/edk2/aarch64/QEMU_VARS.fd"},                    // Arch
			firmwarePair{"/usr/share/qemu/edk2-aarch64-code.fd", "/usr/share/qemu/edk2-arm-vars.fd"},
			firmwarePair{"/opt/homebrew/share/qemu/edk2-aarch64-code.fd", "/opt/homebrew/share/qemu/edk2-arm-vars.fd"},
			firmwarePair{"/usr/local/share/qemu/edk2-aarch64-code.fd", "/usr/local/share/qemu/edk2-arm-vars.fd"},
		)
	}
	return out
}

// firmwareHint names the package that provides UEFI firmware for arch.
func firmwareHint(arch string) string {
	deb, fedora := "ovmf", "edk2-ovmf"
	if arch == "aarch64" {
		deb, fedora = "qemu-efi-aarch64", "edk2-aarch64"
	}
	return fmt.Sprintf("install the %s package (Debian/Ubuntu; %s on Fedora, qemu on Homebrew) or use an image with a kernel for direct boot", deb, fedora)
}

// findFirmware returns the first candidate whose code image exists. A
// missing vars template is tolerated: the store then starts erased.
func findFirmware(arch string, shareDirs []string, exists func(string) bool) (Firmware, error) {
	cands := firmwareCandidates(arch, shareDirs)
	for _, c := range cands {
		if !exists(c.code) {
			continue
		}
		fw := Firmware{Code: c.code}
		if exists(c.vars) {
			fw.VarsTemplate = c.vars
		}
		return fw, nil
	}
	looked := make([]string, 0, len(cands))
	for _, c := range cands {
		looked = append(looked, c.code)
	}
	return Firmware{}, fmt.Errorf("no UEFI firmware for %s (looked for %s): %s", arch, strings.Join(looked, ", "), firmwareHint(arch))
}

// shareDirsFor derives <prefix>/share/qemu from <prefix>/bin/qemu-system-*,
// which finds Homebrew's or a self-built QEMU's firmware next to it.
func shareDirsFor(binary string) []string {
	if binary == "" {
		return nil
	}
	if p, err := filepath.EvalSymlinks(binary); err == nil {
		binary = p
	}
	return []string{filepath.Join(filepath.Dir(filepath.Dir(binary)), "share", "qemu")}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// prepareEFIVars creates the instance's writable UEFI variable store once:
// a copy of the template, or an erased store as large as the code image
// (QEMU's virt machine wants both pflash units the same size).
func prepareEFIVars(dir string, fw Firmware) error {
	dst := EFIVarsPath(dir)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	tmp := dst + ".tmp"
	if err := writeVars(tmp, fw); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := atomicfile.Commit(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("create EFI vars %s: %w", dst, err)
	}
	return nil
}

func writeVars(dst string, fw Firmware) error {
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create EFI vars %s: %w", dst, err)
	}
	defer out.Close()
	if fw.VarsTemplate == "" {
		st, err := os.Stat(fw.Code)
		if err != nil {
			return fmt.Errorf("size of firmware %s: %w", fw.Code, err)
		}
		if err := out.Truncate(st.Size()); err != nil {
			return fmt.Errorf("size EFI vars %s: %w", dst, err)
		}
		return out.Close()
	}
	in, err := os.Open(fw.VarsTemplate)
	if err != nil {
		return fmt.Errorf("open EFI vars template: %w", err)
	}
	defer in.Close()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copy EFI vars %s to %s: %w", fw.VarsTemplate, dst, err)
	}
	return out.Close()
}
