// Package qemu runs a driver.Spec under QEMU: a pure argv builder (Args),
// host detection (accelerator, firmware, virtiofsd) and supervision of the
// qemu and virtiofsd processes through QMP.
package qemu

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

// Files qemu and virtiofsd keep in the instance folder (Spec.Dir); the
// names live in driver so the instance store knows them too.
const (
	qmpSocketName = driver.QMPSocketFile
	pidFileName   = driver.QEMUPIDFile
	logFileName   = driver.QEMULogFile
	efiVarsName   = driver.EFIVarsFile
)

// Paths of the files above, so callers never build these names by hand.
func QMPSocketPath(dir string) string   { return filepath.Join(dir, qmpSocketName) }
func AgentSocketPath(dir string) string { return filepath.Join(dir, agent.HostSocketName) }
func PIDFilePath(dir string) string     { return filepath.Join(dir, pidFileName) }
func LogPath(dir string) string         { return filepath.Join(dir, logFileName) }
func EFIVarsPath(dir string) string     { return filepath.Join(dir, efiVarsName) }

func virtiofsSocketPath(dir string, i int) string {
	return filepath.Join(dir, numbered(driver.VirtiofsSocketFiles, i))
}

func virtiofsdPIDPath(dir string, i int) string {
	return filepath.Join(dir, numbered(driver.VirtiofsdPIDFiles, i))
}

// numbered fills the share index into a per-share file pattern.
func numbered(pattern string, i int) string {
	return strings.Replace(pattern, "*", strconv.Itoa(i), 1)
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
	Accel     string    // AccelKVM, AccelHVF or AccelTCG
	Version   Version   // of the qemu binary
	Firmware  Firmware  // used when Spec.Kernel is empty
	Virtiofsd Virtiofsd // needed for mounts.TypeVirtiofs shares; empty Path: not available

	// pausedBIOS boots with -S and the machine's default firmware (SeaBIOS
	// on q35) with no kernel: the process tests need a qemu that stays up
	// without a guest image or UEFI firmware.
	pausedBIOS bool
	// incoming: the guest is resumed from a saved state on incomingFD
	// instead of booting.
	incoming bool
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
// Each device group has its own builder below; their order here is the
// order of the options on the command line.
func Args(spec driver.Spec, env HostEnv) ([]string, error) {
	arch, err := preflight(spec, env)
	if err != nil {
		return nil, err
	}
	virtiofs := hasVirtiofs(spec.Shares)
	var b argv
	b.add(identityArgs(spec.Name))
	b.add(machineArgs(arch, env.Accel, virtiofs))
	b.add(memoryArgs(GuestCPUs(spec.CPUs, env.Accel), spec.MemoryMiB, virtiofs))
	b.add(bootArgs(spec, env, arch))
	b.add(controlArgs(spec.Dir, spec.SerialLog))
	b.add(diskArgs(spec.Disks, spec.DiskSync, bootsEFI(spec, env)))
	b.add(networkArgs(spec.Network, spec.NetStack, spec.NetMAC))
	b.add(guestDeviceArgs(arch))
	b.add(agentChannelArgs(spec.Dir))
	b.add(shareArgs(spec, env.Virtiofsd.Path))
	b.add(scratchPortArgs())
	b.add(incomingArgs(env.incoming))
	return b.result()
}

// incomingArgs load the guest's state from incomingFD (the same command
// line as the saved VM's, plus this) instead of booting it.
func incomingArgs(incoming bool) ([]string, error) {
	if !incoming {
		return nil, nil
	}
	return []string{"-incoming", fmt.Sprintf("fd:%d", incomingFD)}, nil
}

// argv collects the device groups' options and keeps the first error, so
// Args reads as the list of groups.
type argv struct {
	args []string
	err  error
}

func (b *argv) add(args []string, err error) {
	if b.err != nil {
		return
	}
	if err != nil {
		b.err = err
		return
	}
	b.args = append(b.args, args...)
}

func (b *argv) result() ([]string, error) {
	if b.err != nil {
		return nil, b.err
	}
	return b.args, nil
}

// preflight checks what every group depends on and returns QEMU's name for
// the target arch.
func preflight(spec driver.Spec, env HostEnv) (string, error) {
	arch, err := qemuArch(spec.Arch)
	if err != nil {
		return "", err
	}
	if spec.Dir == "" {
		return "", fmt.Errorf("spec for %q has no instance folder", spec.Name)
	}
	if env.Version != (Version{}) && !env.Version.AtLeast(minVersion.Major, minVersion.Minor) {
		return "", fmt.Errorf("qemu %s is too old: vmdock needs %d.%d or newer", env.Version, minVersion.Major, minVersion.Minor)
	}
	return arch, nil
}

// identityArgs name the process (and, where the host can, its threads:
// nameOptions) and switch off everything QEMU would add on its own: no
// default devices, no config files, no window, and a guest reboot ends the
// process so the host agent sees it.
func identityArgs(name string) ([]string, error) {
	return []string{
		"-name", esc("vmdock-"+name) + nameOptions,
		"-nodefaults", "-no-user-config",
		"-display", "none",
		"-no-reboot",
		"-msg", "timestamp=on",
	}, nil
}

// machineArgs are the machine type, accelerator and CPU model.
func machineArgs(arch, accel string, virtiofs bool) ([]string, error) {
	switch accel {
	case AccelKVM, AccelHVF, AccelTCG, "":
	default:
		return nil, fmt.Errorf("accelerator %q: accepted values are %s, %s and %s", accel, AccelKVM, AccelHVF, AccelTCG)
	}
	machine := baseMachine(arch)
	if virtiofs {
		// vhost-user devices map guest RAM into virtiofsd, so RAM must be a
		// shared file descriptor (see memoryArgs).
		machine += ",memory-backend=mem"
	}
	a := append([]string{"-machine", machine}, accelArgs(accel, arch)...)
	if arch == "x86_64" {
		a = append(a, "-vga", "none")
	}
	return a, nil
}

// GuestCPUs is the vCPU count QEMU gives a guest that asked for cpus:
// under TCG, 1. Emulation runs on one host thread here (thread=single, see
// accelArgs), which takes the vCPUs in turn, so a second vCPU adds no
// speed, only the cost of a guest kernel that spins and sends IPIs for a
// CPU that is not running: a cold start to docker-ready took 50 s with 2
// vCPUs against 40 s with 1, side by side.
func GuestCPUs(cpus int, accel string) int {
	if isTCG(accel) && cpus > 1 {
		return 1
	}
	return cpus
}

// memoryArgs size the VM; with virtiofs RAM is a shared memfd that
// virtiofsd can map.
func memoryArgs(cpus, memoryMiB int, virtiofs bool) ([]string, error) {
	if cpus < 1 {
		return nil, fmt.Errorf("cpus %d: must be at least 1", cpus)
	}
	if memoryMiB < 128 {
		return nil, fmt.Errorf("memory %d MiB: must be at least 128 MiB", memoryMiB)
	}
	a := []string{"-smp", strconv.Itoa(cpus), "-m", strconv.Itoa(memoryMiB)}
	if virtiofs {
		a = append(a, "-object", fmt.Sprintf("memory-backend-memfd,id=mem,size=%dM,share=on", memoryMiB))
	}
	return a, nil
}

// bootsEFI reports whether the VM boots through UEFI firmware, which then
// needs a boot disk marked with bootindex.
func bootsEFI(spec driver.Spec, env HostEnv) bool {
	return !env.pausedBIOS && spec.Kernel == ""
}

// bootArgs load the kernel directly, or the UEFI firmware with the
// instance's variable store, or (process tests) nothing at all.
func bootArgs(spec driver.Spec, env HostEnv, arch string) ([]string, error) {
	switch {
	case env.pausedBIOS:
		return []string{"-S"}, nil
	case spec.Kernel != "":
		a := []string{"-kernel", spec.Kernel}
		if spec.Initrd != "" {
			a = append(a, "-initrd", spec.Initrd)
		}
		cmdline := spec.Cmdline
		if isTCG(env.Accel) {
			cmdline = withTCGKernelArgs(cmdline)
		}
		return append(a, "-append", withSerialConsole(cmdline, arch)), nil
	}
	if env.Firmware.Code == "" {
		return nil, fmt.Errorf("no UEFI firmware for %s: %s", arch, firmwareHint(arch))
	}
	return []string{
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + esc(env.Firmware.Code),
		"-drive", "if=pflash,format=raw,unit=1,file=" + esc(EFIVarsPath(spec.Dir)),
	}, nil
}

// controlArgs are the pid file, the QMP socket the driver supervises QEMU
// through, and the serial console log when asked for.
func controlArgs(dir, serialLog string) ([]string, error) {
	a := []string{
		"-pidfile", PIDFilePath(dir),
		"-chardev", "socket,id=qmp,path=" + esc(QMPSocketPath(dir)) + ",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
	}
	if serialLog != "" {
		// append=on keeps earlier boots' consoles for post-mortems.
		a = append(a,
			"-chardev", "file,id=serial0,path="+esc(serialLog)+",append=on",
			"-serial", "chardev:serial0",
		)
	}
	return a, nil
}

// diskArgs attach the disks in Spec order, so the guest sees vda, vdb, ...
// as listed, each with its serial when it has one. Under EFI the first
// disk that is not an ISO is the boot disk.
func diskArgs(disks []driver.Disk, diskSync string, efi bool) ([]string, error) {
	cache, err := driveCache(diskSync)
	if err != nil {
		return nil, err
	}
	var a []string
	bootSet := !efi
	for i, d := range disks {
		drive, err := driveOption(i, d, cache)
		if err != nil {
			return nil, err
		}
		dev := "virtio-blk-pci,drive=" + diskID(i)
		if d.Serial != "" {
			// A device property: QEMU removed the old -drive serial= option.
			if err := driver.CheckSerial(d.Serial); err != nil {
				return nil, err
			}
			dev += ",serial=" + d.Serial
		}
		if !bootSet && !d.CDROM {
			dev += ",bootindex=0"
			bootSet = true
		}
		a = append(a, "-drive", drive, "-device", dev)
	}
	return a, nil
}

func diskID(i int) string { return fmt.Sprintf("disk%d", i) }

// driveOption is the -drive value of disk i.
func driveOption(i int, d driver.Disk, cache string) (string, error) {
	if d.Path == "" {
		return "", fmt.Errorf("disk %d has no path", i)
	}
	format := d.Format
	if d.CDROM {
		format = "raw" // an ISO image is a raw block device to virtio-blk
	}
	switch format {
	case "raw", "qcow2":
	case "":
		return "", fmt.Errorf("disk %s has no format: accepted values are raw and qcow2", d.Path)
	default:
		return "", fmt.Errorf("disk %s format %q: accepted values are raw and qcow2", d.Path, d.Format)
	}
	drive := fmt.Sprintf("if=none,id=%s,file=%s,format=%s", diskID(i), esc(d.Path), format)
	if d.CDROM || d.ReadOnly {
		// The cidata ISO stays a virtio disk rather than an emulated
		// CD-ROM: blkid finds its iso9660 label on /dev/vdX all the same,
		// and the guest needs no ATAPI/SCSI driver.
		return drive + ",readonly=on,cache=" + cache, nil
	}
	return drive + ",cache=" + cache + ",discard=unmap,detect-zeroes=unmap", nil
}

// networkArgs are the NIC and what carries it: slirp, where
// restrict=on cuts the guest off from everything but the host-side slirp
// services while the agent channel keeps working; or the host agent's own
// stack on netFD, which enforces isolation itself and leases the guest's
// address by the MAC given here.
func networkArgs(network, stack, mac string) ([]string, error) {
	switch network {
	case "", driver.NetworkUser, driver.NetworkIsolated:
	default:
		return nil, fmt.Errorf("network %q: accepted values are %s and %s", network, driver.NetworkUser, driver.NetworkIsolated)
	}
	switch stack {
	case "", driver.NetStackSlirp:
		netdev := "user,id=" + netdevID
		if network == driver.NetworkIsolated {
			netdev += ",restrict=on"
		}
		return []string{"-netdev", netdev, "-device", "virtio-net-pci,netdev=" + netdevID}, nil
	case driver.NetStackGvisor:
		if _, err := net.ParseMAC(mac); err != nil {
			return nil, fmt.Errorf("network stack %s: the NIC's MAC %q: accepted: a MAC address like 52:54:00:12:34:56", stack, mac)
		}
		return []string{"-netdev", fmt.Sprintf("socket,id=%s,fd=%d", netdevID, netFD),
			"-device", "virtio-net-pci,netdev=" + netdevID + ",mac=" + mac}, nil
	default:
		return nil, fmt.Errorf("network stack %q: accepted values on qemu are %s and %s", stack, driver.NetStackSlirp, driver.NetStackGvisor)
	}
}

// guestDeviceArgs are the entropy source, the panic device and the
// memory balloon.
//
// Entropy early in boot: without it TCG guests can stall on getrandom. The
// default backend (rng-builtin, QEMU >= 5.1) needs no host device.
//
// A guest kernel panic pauses the VM in state guest-panicked, where the
// run-state watch sees it, instead of rebooting (panic=-1) into a
// -no-reboot exit that looks like a power-off.
//
// The balloon is never inflated; it is there for free page reporting
// (QEMU >= 5.1, guest virtio_balloon): the guest tells QEMU which freed
// pages (in 2 MiB blocks) it no longer uses and QEMU drops them from
// its RSS, so memory a container used comes back to the host once it
// exits. deflate-on-oom lets the guest take pages back from the balloon
// instead of OOM-killing, should anything ever inflate it.
func guestDeviceArgs(arch string) ([]string, error) {
	return []string{
		"-device", "virtio-rng-pci",
		"-device", panicDevice(arch), "-action", "panic=pause",
		"-device", balloonDevice,
	}, nil
}

// balloonDevice is the virtio balloon with free page reporting.
const balloonDevice = "virtio-balloon-pci,id=balloon0,free-page-reporting=on,deflate-on-oom=on"

// agentChannelArgs are the virtio-serial port the guest agent opens and
// the host-side socket the host agent dials.
func agentChannelArgs(dir string) ([]string, error) {
	return []string{
		"-device", "virtio-serial-pci,id=vser0",
		"-chardev", "socket,id=agent,path=" + esc(AgentSocketPath(dir)) + ",server=on,wait=off",
		"-device", "virtserialport,bus=vser0.0,chardev=agent,name=" + agent.SerialName,
	}, nil
}

// shareArgs export the shares, each by its own mount type. The config
// chose and checked the types; what is checked here is what QEMU can do
// with them: virtiofs needs a virtiofsd.
func shareArgs(spec driver.Spec, virtiofsdPath string) ([]string, error) {
	if hasVirtiofs(spec.Shares) && virtiofsdPath == "" {
		return nil, fmt.Errorf("mount type %s needs virtiofsd, which was not found: install the virtiofsd package or use mount type %s",
			mounts.TypeVirtiofs, mounts.Type9p)
	}
	var a []string
	tags := map[string]bool{}
	for i, s := range spec.Shares {
		if s.Tag == "" || s.HostPath == "" {
			return nil, fmt.Errorf("share %d needs a tag and a host path (got tag %q, path %q)", i, s.Tag, s.HostPath)
		}
		if tags[s.Tag] {
			return nil, fmt.Errorf("share tag %q is used twice: tags must be unique", s.Tag)
		}
		tags[s.Tag] = true
		switch s.Type {
		case mounts.TypeVirtiofs:
			a = append(a, virtiofsShareArgs(spec.Dir, i, s)...)
		case mounts.Type9p:
			a = append(a, ninePShareArgs(i, s)...)
		default:
			return nil, fmt.Errorf("share %s: mount type %q: accepted values are %s and %s", s.HostPath, s.Type, mounts.TypeVirtiofs, mounts.Type9p)
		}
	}
	return a, nil
}

// virtiofsShareArgs connect share i to the virtiofsd the driver starts on
// the instance's virtiofs-<i>.sock.
func virtiofsShareArgs(dir string, i int, s mounts.Share) []string {
	chr := fmt.Sprintf("vfs%d", i)
	return []string{
		"-chardev", fmt.Sprintf("socket,id=%s,path=%s", chr, esc(virtiofsSocketPath(dir, i))),
		"-device", fmt.Sprintf("vhost-user-fs-pci,chardev=%s,tag=%s", chr, esc(s.Tag)),
	}
}

// ninePShareArgs export share i through QEMU's own 9p server.
//
// security_model=none: qemu creates files as the user running it with the
// mode the guest asked for, and ignores a failing chown. So files a
// container (guest root) writes show up on the host owned by the host user
// with normal modes. mapped-xattr would give 0600 files owned by qemu's
// user with the real mode hidden in xattrs; passthrough makes every create
// fail with EPERM unless qemu runs as root, because it insists on chown to
// the guest uid. multidevs=remap keeps inode numbers unique when the shared
// tree spans several host file systems.
func ninePShareArgs(i int, s mounts.Share) []string {
	v := fmt.Sprintf("local,path=%s,mount_tag=%s,security_model=none,multidevs=remap,id=fs%d", esc(s.HostPath), esc(s.Tag), i)
	if s.ReadOnly {
		v += ",readonly=on"
	}
	return []string{"-virtfs", v}
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
	if !isTCG(accel) {
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
	return []string{"-accel", fmt.Sprintf("tcg,thread=single,tb-size=%d", tcgTBSizeMiB), "-cpu", cpu}
}

// isTCG reports whether accel means emulation: accelArgs gives TCG to
// every accelerator that is not KVM or HVF, the empty one included.
func isTCG(accel string) bool { return accel != AccelKVM && accel != AccelHVF }

// tcgKernelArgs are added to an emulated guest's kernel command line only;
// under KVM, HVF and vz the guest runs on real silicon and keeps the
// image's command line.
//
//   - mitigations=off: TCG executes nothing speculatively, so there is no
//     side channel for the guest kernel to close, while its mitigations
//     (page-table isolation's CR3 switches flush QEMU's soft TLB on every
//     syscall and interrupt, retpolines, buffer clears) cost emulated
//     instructions on every kernel entry.
//   - loglevel=6: the console prints notice and worse, not the few hundred
//     info lines of a boot, each byte of which is emulated UART port I/O.
//     Notice keeps the "Linux version" banner `vmdock logs serial` is
//     checked for, and a panic (emerg) is always printed for the hang
//     watch. Not `quiet`: that would also silence systemd's status lines,
//     the only console output between the kernel and the agent, and a slow
//     emulated boot would then look like a hang to the silence check.
var tcgKernelArgs = []string{"mitigations=off", "loglevel=6"}

// withTCGKernelArgs appends each of tcgKernelArgs whose key cmdline does
// not set already: the image's or a test's own choice wins. An image that
// boots `quiet` keeps its quieter console.
func withTCGKernelArgs(cmdline string) string {
	have := map[string]bool{}
	for _, f := range strings.Fields(cmdline) {
		key, _, _ := strings.Cut(f, "=")
		have[key] = true
	}
	if have["quiet"] {
		have["loglevel"] = true
	}
	out := strings.Fields(cmdline)
	for _, arg := range tcgKernelArgs {
		key, _, _ := strings.Cut(arg, "=")
		if !have[key] {
			out = append(out, arg)
		}
	}
	return strings.Join(out, " ")
}

// tcgTBSizeMiB caps TCG's translated-code buffer, which counts in QEMU's
// RSS once filled: QEMU 7.2's default of 1 GiB filled up over a boot and a
// docker run (1.2 GiB of QEMU's own RSS), 128 MiB took no measurable time
// from them (84 s to ready, 12.6 s docker run, as with the default) and
// 64 MiB did (docker run 18.7 s): README, Idle cost.
const tcgTBSizeMiB = 128

// withSerialConsole makes the port -serial feeds to serial.log the
// kernel's console: ttyS0 on q35, the PL011 ttyAMA0 on virt.
func withSerialConsole(cmdline, arch string) string {
	if arch == "aarch64" {
		return driver.WithConsole(cmdline, "ttyAMA0")
	}
	return driver.WithConsole(cmdline, "ttyS0")
}
