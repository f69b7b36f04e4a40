package vz

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

// kernelFile writes a fake kernel whose first bytes are head.
func kernelFile(t *testing.T, head []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vmlinux")
	if err := os.WriteFile(p, head, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func arm64Image() []byte {
	b := make([]byte, 128)
	copy(b, "MZ") // EFI stub, like Debian's arm64 Image
	copy(b[0x38:], "ARM\x64")
	return b
}

func zbootImage() []byte {
	b := make([]byte, 128)
	copy(b, "MZ\x00\x00zimg")
	return b
}

var (
	armHost = HostInfo{Arch: driver.ArchARM64, MacOSVersion: "14.5", Rosetta: RosettaInstalled}
	x86Host = HostInfo{Arch: driver.ArchAMD64, MacOSVersion: "13.6.1", Rosetta: RosettaUnsupported}
)

func baseSpec(t *testing.T) driver.Spec {
	return driver.Spec{
		Name: "default", Dir: "/inst", Arch: driver.ArchARM64, CPUs: 2, MemoryMiB: 2048,
		Kernel:  kernelFile(t, arm64Image()),
		Initrd:  "/img/initrd",
		Cmdline: "root=/dev/vda rw",
		Disks: []driver.Disk{
			{Path: "/inst/disk.raw", Format: "raw", Serial: driver.SerialRoot},
			{Path: "/inst/boot.iso", Format: "raw", CDROM: true},
		},
		Shares:    []mounts.Share{{Tag: "m0", HostPath: "/Users/me", Type: mounts.TypeVirtiofs}, {Tag: "m1", HostPath: "/opt/ro", ReadOnly: true, Type: mounts.TypeVirtiofs}},
		Network:   driver.NetworkUser,
		DiskSync:  driver.DiskSyncFsync,
		SerialLog: "/inst/serial.log",
	}
}

func TestPlanFull(t *testing.T) {
	spec := baseSpec(t)
	got, err := Plan(spec, armHost)
	if err != nil {
		t.Fatal(err)
	}
	want := &VMPlan{
		CPUs: 2, MemoryBytes: 2048 << 20,
		Boot: BootPlan{Kind: BootLinux, Kernel: spec.Kernel, Initrd: "/img/initrd", Cmdline: "root=/dev/vda rw console=hvc0"},
		Disks: []DiskPlan{
			{Path: "/inst/disk.raw", Caching: CachingCached, Sync: SyncFsync, Identifier: "vmdock-root"},
			{Path: "/inst/boot.iso", ReadOnly: true, Caching: CachingCached, Sync: SyncFsync},
		},
		Shares:      []SharePlan{{Tag: "m0", HostPath: "/Users/me"}, {Tag: "m1", HostPath: "/opt/ro", ReadOnly: true}},
		NAT:         true,
		VsockPort:   agent.VsockPort,
		Entropy:     true,
		Balloon:     true,
		Console:     ConsolePlan{Log: "/inst/serial.log", Append: true},
		StopTimeout: StopTimeout,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Plan =\n%+v\nwant\n%+v", got, want)
	}
}

func TestPlanDecisions(t *testing.T) {
	tests := []struct {
		name  string
		host  HostInfo
		edit  func(*driver.Spec)
		check func(*testing.T, *VMPlan)
	}{
		{"isolated has no NIC", armHost, func(s *driver.Spec) { s.Network = driver.NetworkIsolated },
			func(t *testing.T, p *VMPlan) {
				if p.NAT {
					t.Error("NAT in isolated mode")
				}
			}},
		{"empty network is NAT", armHost, func(s *driver.Spec) { s.Network = "" },
			func(t *testing.T, p *VMPlan) {
				if !p.NAT {
					t.Error("no NAT for default network")
				}
			}},
		{"gvisor stack replaces NAT", armHost, func(s *driver.Spec) { s.NetStack, s.NetMAC = driver.NetStackGvisor, stackMAC },
			func(t *testing.T, p *VMPlan) { wantStack(t, p) }},
		{"gvisor stack isolates itself", armHost, func(s *driver.Spec) {
			s.NetStack, s.NetMAC, s.Network = driver.NetStackGvisor, stackMAC, driver.NetworkIsolated
		},
			func(t *testing.T, p *VMPlan) { wantStack(t, p) }},
		{"vznat is NAT", armHost, func(s *driver.Spec) { s.NetStack = driver.NetStackVZNAT },
			func(t *testing.T, p *VMPlan) {
				if !p.NAT || p.Stack {
					t.Errorf("vznat: NAT %v, stack %v; want NAT only", p.NAT, p.Stack)
				}
			}},
		{"sync full", armHost, func(s *driver.Spec) { s.DiskSync = driver.DiskSyncFull },
			func(t *testing.T, p *VMPlan) { wantSync(t, p, SyncFull) }},
		{"sync none", armHost, func(s *driver.Spec) { s.DiskSync = driver.DiskSyncNone },
			func(t *testing.T, p *VMPlan) { wantSync(t, p, SyncNone) }},
		{"sync default fsync", armHost, func(s *driver.Spec) { s.DiskSync = "" },
			func(t *testing.T, p *VMPlan) { wantSync(t, p, SyncFsync) }},
		{"efi boot with var store", armHost, func(s *driver.Spec) { s.Kernel, s.Initrd, s.Cmdline = "", "", "" },
			func(t *testing.T, p *VMPlan) {
				want := BootPlan{Kind: BootEFI, EFIVarStore: "/inst/" + EFIVarsFile}
				if p.Boot != want {
					t.Errorf("boot = %+v, want %+v", p.Boot, want)
				}
			}},
		{"only the virtio console stays", armHost, func(s *driver.Spec) { s.Cmdline = "console=ttyAMA0 console=hvc0 quiet" },
			func(t *testing.T, p *VMPlan) {
				if p.Boot.Cmdline != "quiet console=hvc0" {
					t.Errorf("cmdline = %q", p.Boot.Cmdline)
				}
			}},
		{"empty cmdline gets console", armHost, func(s *driver.Spec) { s.Cmdline = "" },
			func(t *testing.T, p *VMPlan) {
				if p.Boot.Cmdline != "console=hvc0" {
					t.Errorf("cmdline = %q", p.Boot.Cmdline)
				}
			}},
		{"rosetta share with caching on macOS 14", armHost, func(s *driver.Spec) { s.Rosetta = true },
			func(t *testing.T, p *VMPlan) {
				want := RosettaPlan{Tag: agent.RosettaTag, CachingSocket: rosettaCachingSocket}
				if p.Rosetta != want {
					t.Errorf("rosetta = %+v, want %+v", p.Rosetta, want)
				}
			}},
		{"rosetta share without caching on macOS 13", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "13.6", Rosetta: RosettaInstalled},
			func(s *driver.Spec) { s.Rosetta = true },
			func(t *testing.T, p *VMPlan) {
				want := RosettaPlan{Tag: agent.RosettaTag}
				if p.Rosetta != want {
					t.Errorf("rosetta = %+v, want %+v", p.Rosetta, want)
				}
			}},
		{"no rosetta unless asked", armHost, func(s *driver.Spec) {},
			func(t *testing.T, p *VMPlan) {
				if p.Rosetta != (RosettaPlan{}) {
					t.Errorf("rosetta = %+v", p.Rosetta)
				}
			}},
		{"nested virtualization on an M3 with macOS 15", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "15.1", NestedVirtualization: true},
			func(s *driver.Spec) { s.NestedVirtualization = true },
			func(t *testing.T, p *VMPlan) {
				if !p.NestedVirtualization {
					t.Error("nested virtualization not planned")
				}
			}},
		{"nested virtualization off by default", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "15.1", NestedVirtualization: true},
			func(s *driver.Spec) {},
			func(t *testing.T, p *VMPlan) {
				if p.NestedVirtualization {
					t.Error("nested virtualization planned unasked")
				}
			}},
		{"no warnings on Apple silicon", armHost, func(s *driver.Spec) {},
			func(t *testing.T, p *VMPlan) {
				if len(p.Warnings) > 0 {
					t.Errorf("warnings = %q", p.Warnings)
				}
			}},
		{"amd64 bzImage accepted", x86Host, func(s *driver.Spec) {
			s.Arch = driver.ArchAMD64
			s.Kernel = kernelFile(t, []byte{0x1f, 0x8b, 0x08})
		}, func(t *testing.T, p *VMPlan) {
			if p.Boot.Kind != BootLinux {
				t.Errorf("boot = %+v", p.Boot)
			}
		}},
		{"no serial log", armHost, func(s *driver.Spec) { s.SerialLog = "" },
			func(t *testing.T, p *VMPlan) {
				if p.Console.Log != "" {
					t.Errorf("console = %+v", p.Console)
				}
			}},
		{"vz memory limits from host", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "15", MaxCPUs: 8, MaxMemoryMiB: 4096},
			func(s *driver.Spec) { s.CPUs, s.MemoryMiB = 8, 4096 },
			func(t *testing.T, p *VMPlan) {
				if p.CPUs != 8 || p.MemoryBytes != 4<<30 {
					t.Errorf("cpus=%d mem=%d", p.CPUs, p.MemoryBytes)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := baseSpec(t)
			tt.edit(&spec)
			p, err := Plan(spec, tt.host)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}

func wantSync(t *testing.T, p *VMPlan, want SyncMode) {
	t.Helper()
	for _, d := range p.Disks {
		if d.Sync != want || d.Caching != CachingCached {
			t.Errorf("disk %s: caching %s sync %s, want cached %s", d.Path, d.Caching, d.Sync, want)
		}
	}
}

func TestPlanErrors(t *testing.T) {
	tests := []struct {
		name string
		host HostInfo
		edit func(*driver.Spec)
		want string // substring of the error
	}{
		{"gzip kernel", armHost, func(s *driver.Spec) { s.Kernel = kernelFile(t, []byte{0x1f, 0x8b, 0x08, 0}) }, "gzip-compressed"},
		{"zstd kernel", armHost, func(s *driver.Spec) { s.Kernel = kernelFile(t, []byte{0x28, 0xb5, 0x2f, 0xfd, 1}) }, "zstd-compressed"},
		{"zboot kernel", armHost, func(s *driver.Spec) { s.Kernel = kernelFile(t, zbootImage()) }, "EFI zboot"},
		{"not an arm64 image", armHost, func(s *driver.Spec) { s.Kernel = kernelFile(t, make([]byte, 128)) }, "not an arm64 Linux Image"},
		{"short kernel", armHost, func(s *driver.Spec) { s.Kernel = kernelFile(t, []byte("MZ")) }, "not an arm64 Linux Image"},
		{"missing kernel", armHost, func(s *driver.Spec) { s.Kernel = "/nonexistent/vmlinux" }, "read kernel /nonexistent/vmlinux"},
		{"kernel is a folder", armHost, func(s *driver.Spec) { s.Kernel = t.TempDir() }, "vz: read kernel /"},
		{"initrd without kernel", armHost, func(s *driver.Spec) { s.Kernel = "" }, "without a kernel"},
		{"efi without dir", armHost, func(s *driver.Spec) { s.Kernel, s.Initrd, s.Dir = "", "", "" }, "instance folder"},
		{"qcow2 disk", armHost, func(s *driver.Spec) { s.Disks[0].Format = "qcow2" }, "qcow2; vz reads raw disks only: convert"},
		{"vmdk disk", armHost, func(s *driver.Spec) { s.Disks[0].Format = "vmdk" }, `format "vmdk" (accepted: raw)`},
		{"long disk serial", armHost, func(s *driver.Spec) { s.Disks[0].Serial = "vmdock-root-disk-of-x" }, `disk serial "vmdock-root-disk-of-x": 21 bytes, at most 20`},
		{"bad sync", armHost, func(s *driver.Spec) { s.DiskSync = "sometimes" }, `disk sync "sometimes" unknown (accepted: full, fsync, none)`},
		{"bad network", armHost, func(s *driver.Spec) { s.Network = "bridged" }, `network mode "bridged"`},
		{"slirp stack", armHost, func(s *driver.Spec) { s.NetStack = driver.NetStackSlirp }, `network stack "slirp" (accepted: vznat, gvisor)`},
		{"gvisor stack without a MAC", armHost, func(s *driver.Spec) { s.NetStack = driver.NetStackGvisor }, `vz: network stack gvisor: the NIC's MAC "" (accepted: a MAC address`},
		{"9p", armHost, func(s *driver.Spec) { s.Shares[1].Type = mounts.Type9p }, `share /opt/ro: mount type "9p" not supported (accepted: virtiofs)`},
		{"empty tag", armHost, func(s *driver.Spec) { s.Shares[0].Tag = "" }, "empty tag"},
		{"long tag", armHost, func(s *driver.Spec) { s.Shares[0].Tag = strings.Repeat("t", 37) }, "at most 36"},
		{"duplicate tag", armHost, func(s *driver.Spec) { s.Shares[1].Tag = "m0" }, `tag "m0" used twice`},
		{"rosetta tag reserved", armHost, func(s *driver.Spec) { s.Shares[1].Tag = agent.RosettaTag }, "reserved"},
		{"relative share", armHost, func(s *driver.Spec) { s.Shares[0].HostPath = "src" }, `share path "src" is not absolute`},
		{"too few cpus", armHost, func(s *driver.Spec) { s.CPUs = 0 }, "cpus 0 out of range (accepted: 1..64)"},
		{"too many cpus", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "14", MaxCPUs: 10}, func(s *driver.Spec) { s.CPUs = 11 }, "cpus 11 out of range (accepted: 1..10)"},
		{"too little memory", armHost, func(s *driver.Spec) { s.MemoryMiB = 64 }, "memory 64 MiB out of range (accepted: at least 128 MiB)"},
		{"too much memory", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "14", MaxMemoryMiB: 8192}, func(s *driver.Spec) { s.MemoryMiB = 9000 }, "accepted: 128..8192 MiB"},
		{"foreign arch", armHost, func(s *driver.Spec) { s.Arch = driver.ArchAMD64 }, `arch "amd64" requested on a arm64 host`},
		{"macOS 12", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "12.7.6"}, func(s *driver.Spec) {}, "vz needs macOS 13.0 or newer, this host runs 12.7.6"},
		{"bad macOS version", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "fourteen"}, func(s *driver.Spec) {}, `macOS version "fourteen"`},
		{"empty macOS version", HostInfo{Arch: driver.ArchARM64}, func(s *driver.Spec) {}, `macOS version ""`},
		{"no hardware virtualization", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "15.5", NoVirtualization: true}, func(s *driver.Spec) {}, "this Mac offers no hardware virtualization"},
		{"unknown host arch", HostInfo{Arch: "ppc64", MacOSVersion: "14"}, func(s *driver.Spec) {}, `host arch "ppc64"`},
		{"rosetta not installed", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "14", Rosetta: RosettaNotInstalled},
			func(s *driver.Spec) { s.Rosetta = true }, "Rosetta is not installed; run `softwareupdate --install-rosetta` or start from a terminal to be asked"},
		{"rosetta unsupported", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "14", Rosetta: RosettaUnsupported},
			func(s *driver.Spec) { s.Rosetta = true }, "not supported on this Mac"},
		{"rosetta on intel", x86Host, func(s *driver.Spec) { s.Arch = driver.ArchAMD64; s.Rosetta = true }, "Apple silicon (arm64) host, this host is amd64"},
		{"nested virtualization on macOS 14", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "14.6", NestedVirtualization: true},
			func(s *driver.Spec) { s.NestedVirtualization = true }, "nested virtualization needs macOS 15.0 or newer, this host runs 14.6"},
		{"nested virtualization before M3", HostInfo{Arch: driver.ArchARM64, MacOSVersion: "15.2"},
			func(s *driver.Spec) { s.NestedVirtualization = true }, "needs an M3 or newer chip"},
		{"nested virtualization on intel", HostInfo{Arch: driver.ArchAMD64, MacOSVersion: "15.2"},
			func(s *driver.Spec) { s.Arch = driver.ArchAMD64; s.NestedVirtualization = true }, "this host is amd64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := baseSpec(t)
			tt.edit(&spec)
			p, err := Plan(spec, tt.host)
			if err == nil {
				t.Fatalf("Plan = %+v, want error containing %q", p, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// stackMAC is a spec's NIC address on the host agent's stack.
const stackMAC = "52:54:00:ab:cd:ef"

// wantStack: the NIC is on the host agent's stack, with the spec's MAC
// (the one its static lease gives the guest's address), and not behind NAT.
func wantStack(t *testing.T, p *VMPlan) {
	t.Helper()
	if p.NAT || !p.Stack || p.StackMAC != stackMAC {
		t.Errorf("NAT %v, stack %v, MAC %q; want the stack only with %s", p.NAT, p.Stack, p.StackMAC, stackMAC)
	}
}
