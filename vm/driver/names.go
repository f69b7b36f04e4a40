package driver

// VM types: the vmType setting and each driver's Name.
const (
	TypeQEMU = "qemu"
	TypeVZ   = "vz"
)

// Files the drivers keep in an instance folder (Spec.Dir). They are named
// here rather than inside each driver so the instance store can tell them
// from the user's files without importing the drivers.
const (
	QMPSocketFile = "qmp.sock"
	QEMUPIDFile   = "qemu.pid"
	QEMULogFile   = "qemu.log"
	EFIVarsFile   = "efi-vars.fd" // qemu's and vz's EFI variable store

	// vz's identity of the VM: its NIC's MAC address and its
	// VZGenericMachineIdentifier, made at the first start and kept.
	VZMACFile       = "vz-mac"
	VZMachineIDFile = "vz-machine-id"

	// One per virtiofs share, numbered by the share's index.
	VirtiofsSocketFiles = "virtiofs-*.sock"
	VirtiofsdPIDFiles   = "virtiofsd-*.pid"
)
