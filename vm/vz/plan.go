// Package vz runs vmdock machines with Apple's Virtualization.framework
// through github.com/Code-Hex/vz/v3.
//
// Every decision lives in Plan, which is pure Go and unit-tested on any OS;
// the darwin files only translate a VMPlan into vz calls. Keeping the
// mapping dumb is what makes the driver testable on a Linux CI machine.
package vz

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/macos"
)

// DriverName is what Driver.Name and MachineInfo report.
const DriverName = driver.TypeVZ

// EFIVarsFile is the per-instance EFI variable store, kept in Spec.Dir so
// that boot entries written by the guest survive a restart.
const EFIVarsFile = driver.EFIVarsFile

// StopTimeout is how long Stop waits after asking the guest to power off
// before it pulls the plug.
const StopTimeout = 30 * time.Second

// maxTagLen is the virtiofs tag limit Virtualization.framework enforces
// (VZVirtioFileSystemDeviceConfiguration validateTag: 36 bytes).
const maxTagLen = 36

// RosettaAvailability mirrors vz.LinuxRosettaAvailability without cgo.
type RosettaAvailability string

const (
	RosettaUnsupported  RosettaAvailability = "unsupported"
	RosettaNotInstalled RosettaAvailability = "not-installed"
	RosettaInstalled    RosettaAvailability = "installed"
)

// HostInfo is what the plan needs to know about the Mac it runs on. The
// darwin driver fills it from sysctl and vz; tests fill it by hand.
type HostInfo struct {
	Arch         string // GOARCH of the host: driver.ArchARM64 or driver.ArchAMD64
	MacOSVersion string // "14.5"
	Rosetta      RosettaAvailability

	// NoVirtualization: Virtualization.framework says this Mac runs no
	// VMs (VirtualizationSupported is false), as inside a macOS VM
	// without nested virtualization. No configuration would validate.
	NoVirtualization bool

	// NestedVirtualization is vz.IsNestedVirtualizationSupported(): macOS
	// 15 or later on an M3 or newer chip.
	NestedVirtualization bool

	// Limits reported by Virtualization.framework; zero means unknown and
	// the documented defaults below apply.
	MinCPUs, MaxCPUs           int
	MinMemoryMiB, MaxMemoryMiB int
}

// Fallback limits when HostInfo does not carry vz's own values.
const (
	defaultMinCPUs      = 1
	defaultMaxCPUs      = 64
	defaultMinMemoryMiB = 128 // vz allows less, but our guest does not boot below this
)

// BootKind selects the boot loader.
type BootKind string

const (
	BootLinux BootKind = "linux" // VZLinuxBootLoader: direct kernel boot
	BootEFI   BootKind = "efi"   // VZEFIBootLoader: stock cloud images
)

// BootPlan is the boot loader configuration.
type BootPlan struct {
	Kind    BootKind
	Kernel  string // BootLinux
	Initrd  string // BootLinux, optional
	Cmdline string // BootLinux

	// EFIVarStore is the variable store file (BootEFI). The driver creates
	// it when missing and reuses it otherwise.
	EFIVarStore string
}

// CachingMode is how vz caches a disk image; vzmodes.go maps it onto
// vz.DiskImageCachingMode.
type CachingMode string

const CachingCached CachingMode = "cached"

// SyncMode is how guest flushes reach the host disk; vzmodes.go maps it
// onto vz.DiskImageSynchronizationMode.
type SyncMode string

const (
	SyncFull  SyncMode = "full"
	SyncFsync SyncMode = "fsync"
	SyncNone  SyncMode = "none"
)

// DiskPlan is one virtio-blk device.
type DiskPlan struct {
	Path     string
	ReadOnly bool
	Caching  CachingMode
	Sync     SyncMode
	// Identifier is the block device identifier the guest reads as the
	// disk's virtio serial; "" for none.
	Identifier string
}

// SharePlan is one virtiofs device.
type SharePlan struct {
	Tag      string
	HostPath string
	ReadOnly bool
}

// VMPlan is every decision the vz driver makes, ready to be mapped 1:1 onto
// Virtualization.framework objects.
type VMPlan struct {
	CPUs        int
	MemoryBytes uint64

	Boot   BootPlan
	Disks  []DiskPlan
	Shares []SharePlan

	// NAT attaches one virtio-net device behind the framework's NAT. False
	// (isolated) means no network device at all: the agent still talks over
	// vsock, so tunnels keep working.
	NAT bool
	// Stack attaches the virtio-net device to the host agent's network
	// stack instead (network.stack gvisor): a file handle attachment on the
	// datagram socket the spec's NetFile is, with StackMAC, the address
	// the stack's static lease knows. The stack enforces isolation itself.
	Stack    bool
	StackMAC string

	VsockPort uint32 // the guest agent listens here

	// Rosetta is the Rosetta share; its Tag is empty when none is attached.
	Rosetta RosettaPlan

	Entropy bool // virtio-rng: the guest would otherwise wait for entropy at boot

	// Balloon attaches a virtio traditional memory balloon. Nothing drives
	// it yet, so it returns no memory to macOS: a guest keeps the host
	// memory it once touched until it stops. It is attached anyway because
	// vz fixes the device list when the machine is created: a later memory
	// policy can then drive it on running and restored machines alike (a
	// saved state restores only into the same devices).
	Balloon bool

	// Console is the guest's virtio console (hvc0); its Log is empty when
	// there is none.
	Console ConsolePlan

	// NestedVirtualization lets the guest run KVM (macOS 15+, M3 or newer).
	NestedVirtualization bool

	// StopTimeout is the grace period between RequestStop and Stop.
	StopTimeout time.Duration

	// Warnings are conditions that may still work; the driver logs them
	// and does not refuse.
	Warnings []string
}

// ConsolePlan is where the guest's virtio console goes.
type ConsolePlan struct {
	Log string
	// Append keeps the log's earlier boots: the host agent starts reading
	// the console at the file's size before the machine starts, so a
	// truncated file would hide this boot's panic and look like a hang.
	Append bool
}

// Plan decides how spec runs under vz on host. It reads only the first bytes
// of the kernel file (to refuse compressed arm64 kernels) and has no side
// effects.
func Plan(spec driver.Spec, host HostInfo) (*VMPlan, error) {
	ver, err := macos.Parse(host.MacOSVersion)
	if err != nil {
		return nil, fmt.Errorf("vz: %w", err)
	}
	if ver.Less(macos.MinVZ) {
		return nil, fmt.Errorf("vz needs macOS %s or newer, this host runs %s", macos.MinVZ, host.MacOSVersion)
	}
	if host.Arch != driver.ArchARM64 && host.Arch != driver.ArchAMD64 {
		return nil, fmt.Errorf("vz: unknown host arch %q (accepted: arm64, amd64)", host.Arch)
	}
	if host.NoVirtualization {
		return nil, errNoVirtualization
	}
	if spec.Arch != host.Arch {
		return nil, fmt.Errorf("vz runs only guests of the host's arch: arch %q requested on a %s host (use the qemu driver for foreign arches)", spec.Arch, host.Arch)
	}

	p := &VMPlan{
		NAT:         true,
		VsockPort:   agent.VsockPort,
		Entropy:     true,
		Balloon:     true,
		Console:     ConsolePlan{Log: spec.SerialLog, Append: true},
		StopTimeout: StopTimeout,
	}
	if err := planResources(p, spec, host); err != nil {
		return nil, err
	}
	if p.Boot, err = planBoot(spec); err != nil {
		return nil, err
	}
	if p.Disks, err = planDisks(spec); err != nil {
		return nil, err
	}
	if p.Shares, err = planShares(spec); err != nil {
		return nil, err
	}
	if err := planNetwork(p, spec); err != nil {
		return nil, err
	}
	if spec.Rosetta {
		if p.Rosetta, err = planRosetta(host, ver); err != nil {
			return nil, err
		}
	}
	if spec.NestedVirtualization {
		if err := checkNestedVirtualization(host, ver); err != nil {
			return nil, err
		}
		p.NestedVirtualization = true
	}
	planIntelKernel(p, host, ver)
	return p, nil
}

// planNetwork picks the NIC: behind vz's NAT, on the host agent's stack,
// or none (isolated on NAT).
func planNetwork(p *VMPlan, spec driver.Spec) error {
	switch spec.Network {
	case "", driver.NetworkUser:
	case driver.NetworkIsolated:
		p.NAT = false
	default:
		return fmt.Errorf("vz: unknown network mode %q (accepted: user, isolated)", spec.Network)
	}
	switch spec.NetStack {
	case "", driver.NetStackVZNAT:
	case driver.NetStackGvisor:
		if _, err := net.ParseMAC(spec.NetMAC); err != nil {
			return fmt.Errorf("vz: network stack %s: the NIC's MAC %q (accepted: a MAC address like 52:54:00:12:34:56)", spec.NetStack, spec.NetMAC)
		}
		p.NAT, p.Stack, p.StackMAC = false, true, spec.NetMAC
	default:
		return fmt.Errorf("vz: unknown network stack %q (accepted: %s, %s)", spec.NetStack, driver.NetStackVZNAT, driver.NetStackGvisor)
	}
	return nil
}

func planResources(p *VMPlan, spec driver.Spec, host HostInfo) error {
	minC, maxC := orDefault(host.MinCPUs, defaultMinCPUs), orDefault(host.MaxCPUs, defaultMaxCPUs)
	if spec.CPUs < minC || spec.CPUs > maxC {
		return fmt.Errorf("vz: cpus %d out of range (accepted: %d..%d)", spec.CPUs, minC, maxC)
	}
	minM := orDefault(host.MinMemoryMiB, defaultMinMemoryMiB)
	if spec.MemoryMiB < minM || (host.MaxMemoryMiB > 0 && spec.MemoryMiB > host.MaxMemoryMiB) {
		accepted := fmt.Sprintf("at least %d MiB", minM)
		if host.MaxMemoryMiB > 0 {
			accepted = fmt.Sprintf("%d..%d MiB", minM, host.MaxMemoryMiB)
		}
		return fmt.Errorf("vz: memory %d MiB out of range (accepted: %s)", spec.MemoryMiB, accepted)
	}
	p.CPUs = spec.CPUs
	p.MemoryBytes = uint64(spec.MemoryMiB) << 20
	return nil
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func planBoot(spec driver.Spec) (BootPlan, error) {
	if spec.Kernel == "" {
		if spec.Initrd != "" {
			return BootPlan{}, fmt.Errorf("vz: initrd %s given without a kernel", spec.Initrd)
		}
		if spec.Dir == "" {
			return BootPlan{}, errors.New("vz: EFI boot needs the instance folder for its variable store")
		}
		return BootPlan{Kind: BootEFI, EFIVarStore: filepath.Join(spec.Dir, EFIVarsFile)}, nil
	}
	if spec.Arch == driver.ArchARM64 {
		if err := checkARM64Kernel(spec.Kernel); err != nil {
			return BootPlan{}, err
		}
	}
	return BootPlan{
		Kind:    BootLinux,
		Kernel:  spec.Kernel,
		Initrd:  spec.Initrd,
		Cmdline: driver.WithConsole(spec.Cmdline, "hvc0"), // vz's only serial device
	}, nil
}

// Kernel header magics. VZLinuxBootLoader on arm64 only boots a raw arm64
// Image; given a compressed one it fails later with an opaque
// "Internal Virtualization error", so we refuse early with a clear message.
var compressedMagics = []struct {
	name  string
	magic []byte
}{
	{"gzip", []byte{0x1f, 0x8b}},
	{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd}},
	{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}},
	{"bzip2", []byte("BZh")},
	{"lz4", []byte{0x02, 0x21, 0x4c, 0x18}},
}

const (
	arm64MagicOffset = 0x38
	zbootMagicOffset = 4
)

var (
	arm64Magic = []byte("ARM\x64")
	zbootMagic = []byte("zimg") // EFI zboot: "MZ" then "zimg", compressed payload inside
)

func checkARM64Kernel(path string) error {
	head, err := readHead(path, 64)
	if err != nil {
		return fmt.Errorf("vz: read kernel %s: %w", path, err)
	}
	for _, c := range compressedMagics {
		if bytes.HasPrefix(head, c.magic) {
			return fmt.Errorf("vz: kernel %s is %s-compressed; vz on arm64 boots only an uncompressed Image (decompress it first)", path, c.name)
		}
	}
	if len(head) >= zbootMagicOffset+4 && bytes.HasPrefix(head, []byte("MZ")) &&
		bytes.Equal(head[zbootMagicOffset:zbootMagicOffset+4], zbootMagic) {
		return fmt.Errorf("vz: kernel %s is an EFI zboot (compressed) image; vz on arm64 boots only an uncompressed Image (extract it first)", path)
	}
	if len(head) < arm64MagicOffset+4 || !bytes.Equal(head[arm64MagicOffset:arm64MagicOffset+4], arm64Magic) {
		return fmt.Errorf("vz: kernel %s is not an arm64 Linux Image (no ARM\\x64 magic at offset 0x38)", path)
	}
	return nil
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:got], nil
}

func planDisks(spec driver.Spec) ([]DiskPlan, error) {
	sync, err := syncMode(spec.DiskSync)
	if err != nil {
		return nil, err
	}
	disks := make([]DiskPlan, 0, len(spec.Disks))
	for _, d := range spec.Disks {
		switch d.Format {
		case "", "raw":
		case "qcow2":
			return nil, fmt.Errorf("vz: disk %s is qcow2; vz reads raw disks only: convert it first (qemu-img convert -O raw)", d.Path)
		default:
			return nil, fmt.Errorf("vz: disk %s has format %q (accepted: raw)", d.Path, d.Format)
		}
		// Caching is always "cached": the host page cache absorbs guest
		// I/O and guest flushes are honoured through the sync mode. Lima
		// hard-coded fsync sync, and its disk corruption reports came from
		// the uncached/automatic caching modes, not from cached.
		if err := driver.CheckSerial(d.Serial); err != nil {
			return nil, fmt.Errorf("vz: disk %s: %w", d.Path, err)
		}
		disks = append(disks, DiskPlan{
			Path:       d.Path,
			ReadOnly:   d.ReadOnly || d.CDROM, // vz has no CD-ROM; cidata is a read-only virtio-blk disk
			Caching:    CachingCached,
			Sync:       sync,
			Identifier: d.Serial,
		})
	}
	return disks, nil
}

// syncMode maps --disk-sync. Empty means fsync, the mode Lima shipped for
// years without corruption reports when combined with cached caching.
func syncMode(s string) (SyncMode, error) {
	switch s {
	case driver.DiskSyncFull:
		return SyncFull, nil
	case driver.DiskSyncFsync, "":
		return SyncFsync, nil
	case driver.DiskSyncNone:
		return SyncNone, nil
	}
	return "", fmt.Errorf("vz: disk sync %q unknown (accepted: full, fsync, none)", s)
}

// planShares exports the shares over virtiofs, the only file sharing
// Virtualization.framework has.
func planShares(spec driver.Spec) ([]SharePlan, error) {
	seen := map[string]bool{agent.RosettaTag: true}
	shares := make([]SharePlan, 0, len(spec.Shares))
	for _, s := range spec.Shares {
		switch {
		case s.Tag == "":
			return nil, fmt.Errorf("vz: share %s has an empty tag", s.HostPath)
		case len(s.Tag) > maxTagLen:
			return nil, fmt.Errorf("vz: share tag %q is %d bytes (accepted: at most %d)", s.Tag, len(s.Tag), maxTagLen)
		case seen[s.Tag]:
			return nil, fmt.Errorf("vz: share tag %q used twice (or reserved)", s.Tag)
		case !filepath.IsAbs(s.HostPath):
			return nil, fmt.Errorf("vz: share path %q is not absolute", s.HostPath)
		case s.Type != mounts.TypeVirtiofs:
			return nil, fmt.Errorf("vz: share %s: mount type %q not supported (accepted: virtiofs)", s.HostPath, s.Type)
		}
		seen[s.Tag] = true
		shares = append(shares, SharePlan{Tag: s.Tag, HostPath: s.HostPath, ReadOnly: s.ReadOnly})
	}
	return shares, nil
}
