// Package qemu runs a driver.Spec under QEMU: a pure argv builder (Args),
// host detection (accelerator, firmware, virtiofsd) and supervision of the
// qemu and virtiofsd processes through QMP.
package qemu

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vmdock/vmdock/vm/driver"
)

// Files qemu and virtiofsd keep in the instance folder (Spec.Dir).
const (
	qmpSocketName   = "qmp.sock"
	agentSocketName = "agent.sock"
	pidFileName     = "qemu.pid"
	logFileName     = "qemu.log"
	efiVarsName     = "efi-vars.fd"
)

// Paths of the files above, so callers never build these names by hand.
func QMPSocketPath(dir string) string   { return filepath.Join(dir, qmpSocketName) }
func AgentSocketPath(dir string) string { return filepath.Join(dir, agentSocketName) }
func PIDFilePath(dir string) string     { return filepath.Join(dir, pidFileName) }
func LogPath(dir string) string         { return filepath.Join(dir, logFileName) }
func EFIVarsPath(dir string) string     { return filepath.Join(dir, efiVarsName) }

func virtiofsSocketPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("virtiofs-%d.sock", i))
}

func virtiofsdPIDPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("virtiofsd-%d.pid", i))
}

// Version is a QEMU release, as printed by `qemu-system-* --version`.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v >= major.minor.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// minVersion is the oldest QEMU we build argv for: server=on/wait=off
// chardev syntax, -machine memory-backend and -virtfs readonly=on all exist
// from 6.2 (Ubuntu 22.04); Debian 12 ships 7.2.
var minVersion = Version{6, 2, 0}

// ParseVersion reads the first line of `qemu-system-* --version`.
func ParseVersion(out string) (Version, error) {
	const marker = "version "
	i := strings.Index(out, marker)
	if i < 0 {
		return Version{}, fmt.Errorf("parse qemu version from %q: no %q", firstLine(out), marker)
	}
	field := strings.Fields(out[i+len(marker):])
	if len(field) == 0 {
		return Version{}, fmt.Errorf("parse qemu version from %q: empty", firstLine(out))
	}
	parts := strings.SplitN(field[0], ".", 3)
	var nums [3]int
	for k, p := range parts {
		// Some builds append a suffix such as "10.0.0-rc1": keep the
		// leading digits.
		end := strings.IndexFunc(p, func(r rune) bool { return r < '0' || r > '9' })
		if end >= 0 {
			p = p[:end]
		}
		if p == "" {
			break
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, fmt.Errorf("parse qemu version %q: %w", field[0], err)
		}
		nums[k] = n
	}
	if nums[0] == 0 {
		return Version{}, fmt.Errorf("parse qemu version from %q: no major number", firstLine(out))
	}
	return Version{nums[0], nums[1], nums[2]}, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// Firmware is a UEFI code image and the template for its variable store.
type Firmware struct {
	Code string
	// VarsTemplate is copied to the instance's EFIVarsPath on first boot;
	// empty means "start from an erased (zero-filled) store of Code's size".
	VarsTemplate string
}

// HostEnv is everything Args needs to know about the host, detected once by
// Driver.HostEnv so Args itself stays pure.
type HostEnv struct {
	Accel         string   // AccelKVM, AccelHVF or AccelTCG
	Version       Version  // of the qemu binary
	Firmware      Firmware // used when Spec.Kernel is empty
	VirtiofsdPath string   // needed for MountVirtiofs shares; empty: not available

	// pausedBIOS boots with -S and the machine's default firmware (SeaBIOS
	// on q35) with no kernel: the process tests need a qemu that stays up
	// without a guest image or UEFI firmware.
	pausedBIOS bool
}

// qemuArch maps a GOARCH-style Spec.Arch to QEMU's target name.
func qemuArch(arch string) (string, error) {
	switch arch {
	case driver.ArchAMD64:
		return "x86_64", nil
	case driver.ArchARM64:
		return "aarch64", nil
	}
	return "", fmt.Errorf("arch %q: accepted values are %s and %s", arch, driver.ArchAMD64, driver.ArchARM64)
}

// BinaryName is the qemu-system-* executable for arch.
func BinaryName(arch string) (string, error) {
	a, err := qemuArch(arch)
	if err != nil {
		return "", err
	}
	return "qemu-system-" + a, nil
}

// esc doubles commas: QEMU's option parser reads ",," as a literal comma
// inside a value, so any host path is safe in key=value lists.
func esc(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// driveCache maps --disk-sync to a QEMU cache mode.
//
//   - full, fsync: cache=writeback. The guest sees a volatile write cache and
//     its flushes (fsync, journal commits) become host fdatasync calls, so
//     what the guest believes durable is durable. QEMU has no per-drive knob
//     to pick F_FULLFSYNC over fsync on macOS, so both modes are the same
//     here; vz honours the difference.
//   - none: cache=unsafe. Guest flushes are dropped: fastest, but a host
//     crash or power loss can corrupt the guest file system.
//
// O_DIRECT modes (none/directsync) are not offered: they fail on tmpfs and
// some network file systems and buy nothing for a developer VM.
func driveCache(sync string) (string, error) {
	switch sync {
	case "", driver.DiskSyncFsync, driver.DiskSyncFull:
		return "writeback", nil
	case driver.DiskSyncNone:
		return "unsafe", nil
	}
	return "", fmt.Errorf("disk sync %q: accepted values are %s, %s and %s",
		sync, driver.DiskSyncFull, driver.DiskSyncFsync, driver.DiskSyncNone)
}

// Args builds qemu's argv (without the binary itself) for spec on a host
// described by env. It touches no files, so every option is unit-tested.
func Args(spec driver.Spec, env HostEnv) ([]string, error) {
	arch, err := qemuArch(spec.Arch)
	if err != nil {
		return nil, err
	}
	if spec.Dir == "" {
		return nil, fmt.Errorf("spec for %q has no instance folder", spec.Name)
	}
	if spec.CPUs < 1 {
		return nil, fmt.Errorf("cpus %d: must be at least 1", spec.CPUs)
	}
	if spec.MemoryMiB < 128 {
		return nil, fmt.Errorf("memory %d MiB: must be at least 128 MiB", spec.MemoryMiB)
	}
	if env.Version != (Version{}) && !env.Version.AtLeast(minVersion.Major, minVersion.Minor) {
		return nil, fmt.Errorf("qemu %s is too old: vmdock needs %d.%d or newer", env.Version, minVersion.Major, minVersion.Minor)
	}
	cache, err := driveCache(spec.DiskSync)
	if err != nil {
		return nil, err
	}
	virtiofs := spec.HasShareType(driver.MountVirtiofs)
	switch spec.MountType {
	case "", driver.Mount9p, driver.MountVirtiofs:
	default:
		return nil, fmt.Errorf("mount type %q: accepted values are %s and %s", spec.MountType, driver.MountVirtiofs, driver.Mount9p)
	}
	if len(spec.Shares) > 0 && spec.MountType == "" {
		return nil, fmt.Errorf("spec has %d shares but no mount type: accepted values are %s and %s",
			len(spec.Shares), driver.MountVirtiofs, driver.Mount9p)
	}
	if virtiofs && env.VirtiofsdPath == "" {
		return nil, fmt.Errorf("mount type %s needs virtiofsd, which was not found: install the virtiofsd package or use mount type %s",
			driver.MountVirtiofs, driver.Mount9p)
	}

	a := []string{
		"-name", esc("vmdock-" + spec.Name),
		"-nodefaults", "-no-user-config",
		"-display", "none",
		"-no-reboot",
		"-msg", "timestamp=on",
	}

	machine := baseMachine(arch)
	if virtiofs {
		// vhost-user devices map guest RAM into virtiofsd, so RAM must be a
		// shared file descriptor.
		machine += ",memory-backend=mem"
	}
	a = append(a, "-machine", machine)
	switch env.Accel {
	case AccelKVM, AccelHVF, AccelTCG, "":
		a = append(a, accelArgs(env.Accel, arch)...)
	default:
		return nil, fmt.Errorf("accelerator %q: accepted values are %s, %s and %s", env.Accel, AccelKVM, AccelHVF, AccelTCG)
	}
	if arch == "x86_64" {
		a = append(a, "-vga", "none")
	}
	a = append(a,
		"-smp", strconv.Itoa(spec.CPUs),
		"-m", strconv.Itoa(spec.MemoryMiB),
	)
	if virtiofs {
		a = append(a, "-object", fmt.Sprintf("memory-backend-memfd,id=mem,size=%dM,share=on", spec.MemoryMiB))
	}

	// Boot.
	efi := false
	switch {
	case env.pausedBIOS:
		a = append(a, "-S")
	case spec.Kernel != "":
		a = append(a, "-kernel", spec.Kernel)
		if spec.Initrd != "" {
			a = append(a, "-initrd", spec.Initrd)
		}
		a = append(a, "-append", withSerialConsole(spec.Cmdline, arch))
	default:
		if env.Firmware.Code == "" {
			return nil, fmt.Errorf("no UEFI firmware for %s: %s", arch, firmwareHint(arch))
		}
		efi = true
		a = append(a,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+esc(env.Firmware.Code),
			"-drive", "if=pflash,format=raw,unit=1,file="+esc(EFIVarsPath(spec.Dir)),
		)
	}

	// Control and logs.
	a = append(a,
		"-pidfile", PIDFilePath(spec.Dir),
		"-chardev", "socket,id=qmp,path="+esc(QMPSocketPath(spec.Dir))+",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
	)
	if spec.SerialLog != "" {
		// append=on keeps earlier boots' consoles for post-mortems.
		a = append(a,
			"-chardev", "file,id=serial0,path="+esc(spec.SerialLog)+",append=on",
			"-serial", "chardev:serial0",
		)
	}

	// Disks, in Spec order so the guest sees vda, vdb, ... as listed.
	bootSet := false
	for i, d := range spec.Disks {
		if d.Path == "" {
			return nil, fmt.Errorf("disk %d has no path", i)
		}
		format := d.Format
		if d.CDROM {
			format = "raw" // an ISO image is a raw block device to virtio-blk
		}
		switch format {
		case "raw", "qcow2":
		case "":
			return nil, fmt.Errorf("disk %s has no format: accepted values are raw and qcow2", d.Path)
		default:
			return nil, fmt.Errorf("disk %s format %q: accepted values are raw and qcow2", d.Path, d.Format)
		}
		id := fmt.Sprintf("disk%d", i)
		drive := fmt.Sprintf("if=none,id=%s,file=%s,format=%s", id, esc(d.Path), format)
		if d.CDROM || d.ReadOnly {
			// The cidata ISO stays a virtio disk rather than an emulated
			// CD-ROM: blkid finds its iso9660 label on /dev/vdX all the same,
			// and the guest needs no ATAPI/SCSI driver.
			drive += ",readonly=on,cache=" + cache
		} else {
			drive += ",cache=" + cache + ",discard=unmap,detect-zeroes=unmap"
		}
		dev := "virtio-blk-pci,drive=" + id
		if efi && !d.CDROM && !bootSet {
			dev += ",bootindex=0"
			bootSet = true
		}
		a = append(a, "-drive", drive, "-device", dev)
	}

	// Network: slirp; restrict=on cuts the guest off from everything but
	// the host-side slirp services while the agent channel keeps working.
	netdev := "user,id=net0"
	switch spec.Network {
	case "", driver.NetworkUser:
	case driver.NetworkIsolated:
		netdev += ",restrict=on"
	default:
		return nil, fmt.Errorf("network %q: accepted values are %s and %s", spec.Network, driver.NetworkUser, driver.NetworkIsolated)
	}
	a = append(a, "-netdev", netdev, "-device", "virtio-net-pci,netdev=net0")

	// Entropy early in boot: without it TCG guests can stall on getrandom.
	// The default backend (rng-builtin, QEMU >= 5.1) needs no host device.
	a = append(a, "-device", "virtio-rng-pci")

	// A guest kernel panic pauses the VM in state guest-panicked, where the
	// run-state watch sees it, instead of rebooting (panic=-1) into a
	// -no-reboot exit that looks like a power-off.
	a = append(a, "-device", panicDevice(arch), "-action", "panic=pause")

	// Agent channel.
	a = append(a,
		"-device", "virtio-serial-pci,id=vser0",
		"-chardev", "socket,id=agent,path="+esc(AgentSocketPath(spec.Dir))+",server=on,wait=off",
		"-device", "virtserialport,bus=vser0.0,chardev=agent,name="+driver.AgentSerialName,
	)

	// Shares.
	tags := map[string]bool{}
	for i, s := range spec.Shares {
		if s.Tag == "" || s.HostPath == "" {
			return nil, fmt.Errorf("share %d needs a tag and a host path (got tag %q, path %q)", i, s.Tag, s.HostPath)
		}
		if tags[s.Tag] {
			return nil, fmt.Errorf("share tag %q is used twice: tags must be unique", s.Tag)
		}
		tags[s.Tag] = true
		switch spec.ShareType(s) {
		case driver.Mount9p, driver.MountVirtiofs:
		default:
			return nil, fmt.Errorf("share %s: mount type %q: accepted values are %s and %s", s.HostPath, spec.ShareType(s), driver.MountVirtiofs, driver.Mount9p)
		}
		if spec.ShareType(s) == driver.MountVirtiofs {
			chr := fmt.Sprintf("vfs%d", i)
			a = append(a,
				"-chardev", fmt.Sprintf("socket,id=%s,path=%s", chr, esc(virtiofsSocketPath(spec.Dir, i))),
				"-device", fmt.Sprintf("vhost-user-fs-pci,chardev=%s,tag=%s", chr, esc(s.Tag)),
			)
			continue
		}
		// security_model=none: qemu creates files as the user running it
		// with the mode the guest asked for, and ignores a failing chown.
		// So files a container (guest root) writes show up on the host
		// owned by the host user with normal modes. mapped-xattr would give
		// 0600 files owned by qemu's user with the real mode hidden in
		// xattrs; passthrough makes every create fail with EPERM unless
		// qemu runs as root, because it insists on chown to the guest uid.
		// multidevs=remap keeps inode numbers unique when the shared tree
		// spans several host file systems.
		v := fmt.Sprintf("local,path=%s,mount_tag=%s,security_model=none,multidevs=remap,id=fs%d", esc(s.HostPath), esc(s.Tag), i)
		if s.ReadOnly {
			v += ",readonly=on"
		}
		a = append(a, "-virtfs", v)
	}
	return a, nil
}

// baseMachine is QEMU's machine type for a target arch.
func baseMachine(arch string) string {
	if arch == "aarch64" {
		return "virt"
	}
	return "q35"
}

// panicDevice is the pvpanic device the guest kernel reports panics to.
func panicDevice(arch string) string {
	if arch == "aarch64" {
		return "pvpanic-pci"
	}
	return "pvpanic"
}

// accelArgs are the -accel and -cpu arguments for accel on target arch.
// The accelerator probe boots with exactly these, so its verdict holds for
// the real boot.
func accelArgs(accel, arch string) []string {
	if accel == AccelKVM || accel == AccelHVF {
		return []string{"-accel", accel, "-cpu", "host"}
	}
	// thread=single: with one host thread per vCPU (thread=multi), QEMU
	// 7.2 races with the guest kernel patching its own code (static keys,
	// int3 breakpoints) on another vCPU; Debian's 6.12 kernel then dies
	// with "Oops: int3" in sched_clock_cpu during SMP bring-up on some
	// boots. A VM that boots every time beats a faster one that panics
	// now and then. -cpu max gives the guest every feature TCG emulates.
	cpu := "max"
	if arch == "aarch64" {
		// Emulating the architected pointer-authentication cipher (QARMA)
		// costs more than the rest of the CPU; the implementation-defined
		// one is as safe inside one VM.
		cpu += ",pauth-impdef=on"
	}
	return []string{"-accel", "tcg,thread=single", "-cpu", cpu}
}

// withSerialConsole makes the port -serial feeds to serial.log the
// kernel's console: ttyS0 on q35, the PL011 ttyAMA0 on virt.
func withSerialConsole(cmdline, arch string) string {
	if arch == "aarch64" {
		return driver.WithConsole(cmdline, "ttyAMA0")
	}
	return driver.WithConsole(cmdline, "ttyS0")
}
