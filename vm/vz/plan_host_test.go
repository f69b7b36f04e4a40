package vz

import (
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/macos"
)

func hasParam(cmdline, param string) bool {
	for _, f := range strings.Fields(cmdline) {
		if f == param {
			return true
		}
	}
	return false
}

func intelSpec(t *testing.T) driver.Spec {
	s := baseSpec(t)
	s.Arch = driver.ArchAMD64
	s.Kernel = kernelFile(t, []byte{0x1f, 0x8b, 0x08})
	return s
}

func TestIntelKernelWarning(t *testing.T) {
	tests := []struct {
		name      string
		host      HostInfo
		efi       bool
		wantNopku bool
		wantWarn  string // substring; empty: no warning
	}{
		{"intel before 15.5, direct boot", HostInfo{Arch: driver.ArchAMD64, MacOSVersion: "15.4.1"}, false, true, "this host runs 15.4.1, so the guest boots with nopku"},
		{"intel on 13", HostInfo{Arch: driver.ArchAMD64, MacOSVersion: "13.6"}, false, true, "before macOS 15.5 crashes Linux 6.12"},
		{"intel before 15.5, EFI", HostInfo{Arch: driver.ArchAMD64, MacOSVersion: "14.7"}, true, false, "use --vm-type qemu"},
		{"intel on 15.5", HostInfo{Arch: driver.ArchAMD64, MacOSVersion: "15.5"}, false, false, ""},
		{"intel on 26", HostInfo{Arch: driver.ArchAMD64, MacOSVersion: "26.0"}, false, false, ""},
		{"apple silicon before 15.5", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "14.5"}, false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := intelSpec(t)
			if tt.host.Arch == driver.ArchARM64 {
				spec = baseSpec(t)
			}
			if tt.efi {
				spec.Kernel, spec.Initrd = "", ""
			}
			p, err := Plan(spec, tt.host)
			if err != nil {
				t.Fatal(err)
			}
			if got := hasParam(p.Boot.Cmdline, "nopku"); got != tt.wantNopku {
				t.Errorf("nopku in %q = %v, want %v", p.Boot.Cmdline, got, tt.wantNopku)
			}
			switch {
			case tt.wantWarn == "" && len(p.Warnings) > 0:
				t.Errorf("warnings = %q, want none", p.Warnings)
			case tt.wantWarn != "" && (len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], tt.wantWarn)):
				t.Errorf("warnings = %q, want one containing %q", p.Warnings, tt.wantWarn)
			}
			for _, w := range p.Warnings {
				if strings.Contains(w, "\n") {
					t.Errorf("warning spans lines: %q", w)
				}
			}
		})
	}
}

func TestAppendParamOnce(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "nopku",
		"quiet":               "quiet nopku",
		"nopku quiet":         "nopku quiet",
		"quiet nopku":         "quiet nopku",
		"nopkux console=hvc0": "nopkux console=hvc0 nopku",
	} {
		if got := appendParam(in, "nopku"); got != want {
			t.Errorf("appendParam(%q) = %q, want %q", in, got, want)
		}
	}
}

// The plan and the host probe (cmd/vmdock, vm/config) share one gate:
// every version either both accept or both refuse.
func TestPlanGateAgreesWithHostGate(t *testing.T) {
	for _, v := range []string{"11.7", "12.0", "12.7.6", "13.0", "13.6.1", "14.5", "15.5", "26.0"} {
		_, err := Plan(baseSpec(t), HostInfo{Arch: driver.ArchARM64, MacOSVersion: v})
		if planOK, hostOK := err == nil, macos.VZSupported(v); planOK != hostOK {
			t.Errorf("macOS %s: Plan accepts=%v (err %v), macos.VZSupported=%v", v, planOK, err, hostOK)
		}
	}
}
