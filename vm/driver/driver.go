// Package driver holds the pure-Go description of a VM (Spec) and the small
// interfaces every hypervisor backend implements. Nothing here uses cgo, so
// the vz plan and the QEMU argv can both be unit-tested on any OS.
package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/vmdock/vmdock/mounts"
)

// Arch values follow GOARCH names; drivers translate them (x86_64, aarch64).
const (
	ArchAMD64 = "amd64"
	ArchARM64 = "arm64"
)

// Network modes. Isolated keeps the agent channel and every vmdock tunnel
// working while the guest itself has no route anywhere.
const (
	NetworkUser     = "user"
	NetworkIsolated = "isolated"
)

// Network stacks: what carries the guest's NIC. Slirp is QEMU's user
// networking and VZNAT vz's NAT attachment, each its driver's default;
// Gvisor is the host agent's own stack (network/usernet), on either.
const (
	NetStackSlirp  = "slirp"
	NetStackVZNAT  = "vznat"
	NetStackGvisor = "gvisor"
)

// OwnNetStack is vmType's own network, the one every instance ran before
// gvisor was the default: QEMU's slirp, vz's NAT.
func OwnNetStack(vmType string) string {
	if vmType == TypeVZ {
		return NetStackVZNAT
	}
	return NetStackSlirp
}

// Accelerators. AccelAuto lets the driver pick the fastest one that really
// runs a guest on this host; the others are demands that fail loudly.
const (
	AccelAuto = "auto"
	AccelKVM  = "kvm"
	AccelHVF  = "hvf"
	AccelTCG  = "tcg"
)

// Disk sync modes (--disk-sync): how guest flushes reach the host disk.
const (
	DiskSyncFull  = "full"  // flush to stable storage (F_FULLFSYNC on macOS)
	DiskSyncFsync = "fsync" // guest flushes become host fsync
	DiskSyncNone  = "none"  // guest flushes are ignored: fast, unsafe on host crash
)

// Disk is one block device given to the guest, in this order (vda, vdb, ...).
type Disk struct {
	Path     string
	Format   string // "raw" or "qcow2"
	ReadOnly bool
	CDROM    bool // the cidata boot disk
	// Serial is the virtio-blk ID the guest reads (udev links it as
	// /dev/disk/by-id/virtio-<Serial>), so the guest finds the disk by
	// what it is, not by attach order; "" for none. See CheckSerial.
	Serial string
}

// Disk serials vmdock gives its disks.
const (
	SerialRoot = "vmdock-root"
	SerialData = "vmdock-data"
	// SerialBoot is the cidata boot disk's: the guest finds it in sysfs
	// before udev has linked anything, so its agent starts without
	// waiting for the coldplug of every device.
	SerialBoot = "vmdock-cidata"
)

// maxSerialBytes is virtio-blk's ID size (VIRTIO_BLK_ID_BYTES); vz
// refuses a longer block device identifier.
const maxSerialBytes = 20

// CheckSerial accepts a disk serial both drivers can pass on: at most 20
// bytes of letters, digits, '-', '_' and '.' (QEMU's option syntax gives
// ',' a meaning, and vz takes ASCII only).
func CheckSerial(s string) error {
	if len(s) > maxSerialBytes {
		return fmt.Errorf("disk serial %q: %d bytes, at most %d are accepted", s, len(s), maxSerialBytes)
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return fmt.Errorf("disk serial %q: character %q; accepted: letters, digits, '-', '_' and '.'", s, r)
		}
	}
	return nil
}

// ByIDPath is where a Linux guest with udev finds the disk with serial.
func ByIDPath(serial string) string { return "/dev/disk/by-id/virtio-" + serial }

// Spec describes one VM, independent of the hypervisor.
type Spec struct {
	Name      string // instance (profile) name, used in process titles and logs
	Dir       string // instance folder: sockets, logs, pid files go here
	Arch      string // ArchAMD64 or ArchARM64
	CPUs      int
	MemoryMiB int

	// Direct kernel boot when Kernel is set, otherwise EFI firmware boot.
	Kernel  string
	Initrd  string
	Cmdline string

	Disks   []Disk
	Shares  []mounts.Share
	Network string // NetworkUser or NetworkIsolated
	// NetStack is NetStackGvisor or the driver's own (empty, NetStackSlirp
	// or NetStackVZNAT). With gvisor, NetFile is the VM's end of a socket
	// pair whose other end the host agent's stack serves: a stream for
	// QEMU (length-prefixed frames), datagrams for vz.
	NetStack string
	NetFile  *os.File `json:"-"`
	// NetMAC is the NIC's address on the gvisor stack, which the stack
	// (its caller's choice) leases the guest's address to.
	NetMAC   string
	DiskSync string
	Rosetta  bool   // vz on arm64 only
	Accel    string // AccelAuto (or empty), AccelKVM, AccelHVF, AccelTCG; qemu only

	// NestedVirtualization lets the guest use KVM itself (vz on macOS 15+
	// with an M3 or newer chip).
	NestedVirtualization bool

	SerialLog string // serial console output file
}

// ErrUnavailable is returned by Prepare and Start when the driver cannot
// run on this host at all, whatever the spec (vz on Linux, or a vmdock
// built without cgo on macOS).
var ErrUnavailable = errors.New("driver not available on this host")

// Driver starts machines. Implementations: vm/qemu and vm/vz.
type Driver interface {
	Name() string
	// Prepare checks spec against this driver and host without side
	// effects and returns the plan Start (or Resume) boots.
	Prepare(spec Spec) (Plan, error)
	// Start boots the VM plan describes and returns once the hypervisor
	// runs it; the guest may still be booting.
	Start(ctx context.Context, plan Plan) (Machine, error)
}

// Plan is a Spec a driver's Prepare accepted, with what the driver found
// on the host for it (binaries, versions, firmware). Starting from a plan
// rather than a spec means the host is detected and the files checked
// once, and a VM boots only from a spec its driver has checked.
type Plan struct {
	spec  Spec
	found any
}

// NewPlan is for drivers: spec as their Prepare accepted it, and found,
// what they learned doing so, which only the same driver reads back.
func NewPlan(spec Spec, found any) Plan { return Plan{spec: spec, found: found} }

// Spec is the spec the plan boots.
func (p Plan) Spec() Spec { return p.spec }

// WithNetFile is p with the VM's end of the host agent's network stack,
// opened for one Start or Resume after Prepare checked the spec.
func (p Plan) WithNetFile(f *os.File) Plan {
	p.spec.NetFile = f
	return p
}

// Found is what the driver gave NewPlan; nil for a zero Plan.
func (p Plan) Found() any { return p.found }

// Machine is one running VM.
type Machine interface {
	// DialAgent opens the raw host-guest byte stream (vsock or virtio-serial).
	DialAgent(ctx context.Context) (net.Conn, error)
	// Stop asks the guest to power off (ACPI / vz RequestStop); force kills.
	Stop(ctx context.Context, force bool) error
	// Wait blocks until the VM has exited.
	Wait() error
	// Info reports facts for `vmdock status`.
	Info() MachineInfo
}

// RoutedGuest is a Machine whose guest has an address on a network the
// host routes to (vz's NAT network), so the host can dial the guest's
// published ports at that address with the guest agent out of the data
// path. GuestRoutable is false when the VM has no such network (isolated).
type RoutedGuest interface {
	GuestRoutable() bool
}

// CostReporter is a Machine whose VM process the host agent can measure,
// for `vmdock status` to show what the instance costs the host. A driver
// whose VM runs outside vmdock's reach returns an error saying why.
type CostReporter interface {
	// CPUTime is the user plus system CPU time the VM process has used
	// since it started; cheap, so the host agent samples it.
	CPUTime() (time.Duration, error)
	// Memory reads the VM process's resident memory now; it walks the
	// process's mappings, so it is read on demand only.
	Memory() (MemoryUse, error)
}

// Pauser is a Machine whose guest can be frozen in place and let run
// again, with its memory, devices and the host's connections to it kept:
// the host agent pauses an idle VM (QEMU's stop, vz's pause) and wakes it
// on the next use.
type Pauser interface {
	Pause(ctx context.Context) error
	Unpause(ctx context.Context) error
	// Paused asks the VMM whether the guest is paused now: after a Pause
	// or Unpause that failed part way, its state is the VMM's word.
	Paused(ctx context.Context) (bool, error)
}

// MemoryUse is a VM process's resident memory, in bytes.
type MemoryUse struct {
	Resident int64
	// GuestRAMResident is the part of Resident that is the guest's RAM
	// block; 0 when the driver could not tell it apart.
	GuestRAMResident int64
}

// Saver is a Machine that can write its running state to a file and exit,
// for a Resumer to start again where it was (fast start).
type Saver interface {
	// Save pauses the guest, writes its state to path and ends the VM.
	// When it fails the guest runs on as before, unharmed.
	Save(ctx context.Context, path string) (SavedState, error)
}

// SavedState describes a state file Save wrote.
type SavedState struct {
	Format string `json:"format"` // how the file is encoded; Resume must know it
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex, of the file as written
	// Hypervisor is the version that saved it (QEMU's, or macOS's) and
	// Accel the accelerator it ran on: the state loads only on the same.
	Hypervisor string `json:"hypervisor"`
	Accel      string `json:"accel"`
	// Hardware is a digest of the virtual hardware the state was saved
	// from (QEMU: its command line), when the driver keeps one: a state
	// loads only into the same devices, so a newer vmdock that adds or
	// changes one boots cold instead. Empty for drivers that do not.
	Hardware string `json:"hardware,omitempty"`
}

// Resumer is a Driver that can start a VM from a Saver's state file
// instead of booting it.
type Resumer interface {
	// SaveBlocker says why a VM of spec could not be saved on this host
	// (e.g. a device the hypervisor cannot save), or nil.
	SaveBlocker(spec Spec) error
	// Resume starts the VM of plan (from the same Driver's Prepare) from
	// the state file at path, on the accelerator it was saved on, and
	// returns once the guest runs again. A state it cannot load is an
	// error and leaves nothing running.
	Resume(ctx context.Context, plan Plan, path string, saved SavedState, accel string) (Machine, error)
}

// MachineInfo is what a driver can tell about a running machine.
type MachineInfo struct {
	Driver string `json:"driver"`
	Accel  string `json:"accel"` // kvm, hvf, tcg, vz
	// AccelReason says why Accel is not the one asked for, e.g.
	// "kvm unusable: <QEMU's message>" after an automatic fall back to tcg.
	AccelReason string `json:"accelReason,omitempty"`
	PID         int    `json:"pid,omitempty"`
	// Version is the hypervisor's: QEMU's "8.2.2", or the macOS release
	// for vz. Benchmarks print it beside their numbers.
	Version string `json:"version,omitempty"`
	// Problems are faults the VM runs on with, such as a dead virtiofsd:
	// its share fails in the guest until the next start.
	Problems []string `json:"problems,omitempty"`
	// DeadShares are the host folders of virtiofs shares whose daemon died:
	// the guest cannot unmount them (its kernel waits for the daemon's
	// answer), so it cannot power off either, and the stop ends the VM.
	DeadShares []string `json:"deadShares,omitempty"`
	// CPUNote says why the guest runs with fewer vCPUs than it asked for
	// (under TCG, one); "" when it has them all.
	CPUNote string `json:"cpuNote,omitempty"`
}

// WithConsole makes console the kernel's /dev/console. Images name every
// console they might meet and the last console= wins, so the others are
// dropped: each hypervisor has exactly one, and output sent to a console
// that does not exist (early boot, the guest agent's) is lost.
func WithConsole(cmdline, console string) string {
	var out []string
	for _, f := range strings.Fields(cmdline) {
		if !strings.HasPrefix(f, "console=") {
			out = append(out, f)
		}
	}
	return strings.Join(append(out, "console="+console), " ")
}
