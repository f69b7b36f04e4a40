//go:build darwin && cgo

package vz

import (
	"errors"
	"fmt"
	"net"
	"os"

	vz "github.com/Code-Hex/vz/v3"
)

// configure maps a plan and the instance's identity onto vz objects; it
// decides nothing itself. Each device group has its own function below, so
// a change to one kind of device stays in one place.
func configure(p *VMPlan, id vmIdentity, netFile *os.File) (*vz.VirtualMachineConfiguration, error) {
	boot, err := bootLoader(p.Boot)
	if err != nil {
		return nil, err
	}
	cfg, err := vz.NewVirtualMachineConfiguration(boot, uint(p.CPUs), p.MemoryBytes)
	if err != nil {
		return nil, fmt.Errorf("vz: machine configuration: %w", err)
	}
	if err := attachPlatform(cfg, p, id); err != nil {
		return nil, err
	}
	if err := attachNetwork(cfg, p, id.MAC, netFile); err != nil {
		return nil, err
	}
	for _, attach := range []func(*vz.VirtualMachineConfiguration, *VMPlan) error{
		attachStorage,
		attachVsock,
		attachShares,
		attachEntropy,
		attachBalloon,
		attachConsole,
	} {
		if err := attach(cfg, p); err != nil {
			return nil, err
		}
	}
	if ok, err := cfg.Validate(); !ok || err != nil {
		if err == nil {
			err = errors.New("no reason given")
		}
		// An unsigned binary is refused here first.
		return nil, explainMissingEntitlement(fmt.Errorf("vz: configuration rejected: %w", err))
	}
	return cfg, nil
}

// attachStorage adds the disks as virtio-blk devices in plan order, so the
// guest sees vda, vdb, ... as listed, each with its identifier.
func attachStorage(cfg *vz.VirtualMachineConfiguration, p *VMPlan) error {
	storage := make([]vz.StorageDeviceConfiguration, 0, len(p.Disks))
	for _, d := range p.Disks {
		blk, err := blockDevice(d)
		if err != nil {
			return err
		}
		storage = append(storage, blk)
	}
	cfg.SetStorageDevicesVirtualMachineConfiguration(storage)
	return nil
}

func blockDevice(d DiskPlan) (*vz.VirtioBlockDeviceConfiguration, error) {
	att, err := vz.NewDiskImageStorageDeviceAttachmentWithCacheAndSync(d.Path, d.ReadOnly, vzCachingMode(d.Caching), vzSyncMode(d.Sync))
	if err != nil {
		return nil, fmt.Errorf("vz: attach disk %s: %w", d.Path, err)
	}
	blk, err := vz.NewVirtioBlockDeviceConfiguration(att)
	if err != nil {
		return nil, fmt.Errorf("vz: virtio-blk for %s: %w", d.Path, err)
	}
	if d.Identifier != "" {
		// The guest reads it as the disk's serial (VIRTIO_BLK_T_GET_ID).
		if err := blk.SetBlockDeviceIdentifier(d.Identifier); err != nil {
			return nil, fmt.Errorf("vz: block device identifier %q for %s: %w", d.Identifier, d.Path, err)
		}
	}
	return blk, nil
}

// vzCachingMode and vzSyncMode only convert: which vz case a mode means is
// the pure table in vzmodes.go, tested on Linux and checked against vz's
// source by hack/darwincheck.
func vzCachingMode(c CachingMode) vz.DiskImageCachingMode {
	return vz.DiskImageCachingMode(cachingModes[c].Value)
}

func vzSyncMode(s SyncMode) vz.DiskImageSynchronizationMode {
	return vz.DiskImageSynchronizationMode(syncModes[s].Value)
}

// attachNetwork adds the plan's NIC, if any: behind NAT with the
// instance's MAC address (so the guest keeps its DHCP lease), or on the
// host agent's stack through netFile with the MAC its lease knows.
func attachNetwork(cfg *vz.VirtualMachineConfiguration, p *VMPlan, mac *vz.MACAddress, netFile *os.File) error {
	var att vz.NetworkDeviceAttachment
	switch {
	case p.Stack:
		a, stackMAC, err := stackAttachment(p, netFile)
		if err != nil {
			return err
		}
		att, mac = a, stackMAC
	case p.NAT:
		nat, err := vz.NewNATNetworkDeviceAttachment()
		if err != nil {
			return fmt.Errorf("vz: NAT attachment: %w", err)
		}
		att = nat
	default:
		return nil
	}
	nic, err := vz.NewVirtioNetworkDeviceConfiguration(att)
	if err != nil {
		return fmt.Errorf("vz: virtio-net: %w", err)
	}
	nic.SetMACAddress(mac)
	cfg.SetNetworkDevicesVirtualMachineConfiguration([]*vz.VirtioNetworkDeviceConfiguration{nic})
	return nil
}

// stackAttachment is the file handle attachment on the host agent's
// datagram socket, and the MAC address the stack leases the guest's
// address to.
func stackAttachment(p *VMPlan, netFile *os.File) (vz.NetworkDeviceAttachment, *vz.MACAddress, error) {
	if netFile == nil {
		return nil, nil, errors.New("vz: network stack gvisor: the host agent gave the VM no socket to its stack")
	}
	hw, err := net.ParseMAC(p.StackMAC)
	if err != nil {
		return nil, nil, fmt.Errorf("vz: the stack's guest MAC %q: %w", p.StackMAC, err)
	}
	mac, err := vz.NewMACAddress(hw)
	if err != nil {
		return nil, nil, fmt.Errorf("vz: MAC address %s: %w", p.StackMAC, err)
	}
	att, err := vz.NewFileHandleNetworkDeviceAttachment(netFile)
	if err != nil {
		return nil, nil, fmt.Errorf("vz: file handle network attachment: %w", err)
	}
	return att, mac, nil
}

// attachVsock adds the virtio-vsock device the agent channel runs on
// (machine.DialAgent uses the first socket device).
func attachVsock(cfg *vz.VirtualMachineConfiguration, _ *VMPlan) error {
	sock, err := vz.NewVirtioSocketDeviceConfiguration()
	if err != nil {
		return fmt.Errorf("vz: virtio-vsock: %w", err)
	}
	cfg.SetSocketDevicesVirtualMachineConfiguration([]vz.SocketDeviceConfiguration{sock})
	return nil
}

// attachShares adds one virtiofs device per share, then the Rosetta share
// when the plan has one.
func attachShares(cfg *vz.VirtualMachineConfiguration, p *VMPlan) error {
	shares := make([]vz.DirectorySharingDeviceConfiguration, 0, len(p.Shares)+1)
	for _, s := range p.Shares {
		dev, err := virtiofsShare(s)
		if err != nil {
			return err
		}
		shares = append(shares, dev)
	}
	if p.Rosetta.Tag != "" {
		dev, err := rosettaShare(p.Rosetta)
		if err != nil {
			return err
		}
		shares = append(shares, dev)
	}
	cfg.SetDirectorySharingDevicesVirtualMachineConfiguration(shares)
	return nil
}

func virtiofsShare(s SharePlan) (vz.DirectorySharingDeviceConfiguration, error) {
	dir, err := vz.NewSharedDirectory(s.HostPath, s.ReadOnly)
	if err != nil {
		return nil, fmt.Errorf("vz: share %s: %w", s.HostPath, err)
	}
	single, err := vz.NewSingleDirectoryShare(dir)
	if err != nil {
		return nil, fmt.Errorf("vz: share %s: %w", s.HostPath, err)
	}
	dev, err := vz.NewVirtioFileSystemDeviceConfiguration(s.Tag)
	if err != nil {
		return nil, fmt.Errorf("vz: virtiofs tag %q: %w", s.Tag, err)
	}
	dev.SetDirectoryShare(single)
	return dev, nil
}

func attachEntropy(cfg *vz.VirtualMachineConfiguration, p *VMPlan) error {
	if !p.Entropy {
		return nil
	}
	rng, err := vz.NewVirtioEntropyDeviceConfiguration()
	if err != nil {
		return fmt.Errorf("vz: virtio-rng: %w", err)
	}
	cfg.SetEntropyDevicesVirtualMachineConfiguration([]*vz.VirtioEntropyDeviceConfiguration{rng})
	return nil
}

// attachBalloon adds the balloon device VMPlan.Balloon explains; nothing
// sets its target size yet.
func attachBalloon(cfg *vz.VirtualMachineConfiguration, p *VMPlan) error {
	if !p.Balloon {
		return nil
	}
	balloon, err := vz.NewVirtioTraditionalMemoryBalloonDeviceConfiguration()
	if err != nil {
		return fmt.Errorf("vz: memory balloon: %w", err)
	}
	cfg.SetMemoryBalloonDevicesVirtualMachineConfiguration([]vz.MemoryBalloonDeviceConfiguration{balloon})
	return nil
}

// attachConsole writes the guest's virtio console (hvc0) to the serial log
// when the plan has one, creating the log first (see createConsoleLog).
func attachConsole(cfg *vz.VirtualMachineConfiguration, p *VMPlan) error {
	if p.Console.Log == "" {
		return nil
	}
	if err := createConsoleLog(p.Console.Log); err != nil {
		return err
	}
	att, err := vz.NewFileSerialPortAttachment(p.Console.Log, p.Console.Append)
	if err != nil {
		return fmt.Errorf("vz: serial log %s: %w", p.Console.Log, err)
	}
	console, err := vz.NewVirtioConsoleDeviceSerialPortConfiguration(att)
	if err != nil {
		return fmt.Errorf("vz: virtio console: %w", err)
	}
	cfg.SetSerialPortsVirtualMachineConfiguration([]*vz.VirtioConsoleDeviceSerialPortConfiguration{console})
	return nil
}

// bootLoader is the Linux (direct kernel) or EFI boot loader of the plan.
func bootLoader(b BootPlan) (vz.BootLoader, error) {
	switch b.Kind {
	case BootLinux:
		return linuxBootLoader(b)
	case BootEFI:
		return efiBootLoader(b)
	}
	return nil, fmt.Errorf("vz: unknown boot kind %q", b.Kind)
}

func linuxBootLoader(b BootPlan) (vz.BootLoader, error) {
	opts := []vz.LinuxBootLoaderOption{vz.WithCommandLine(b.Cmdline)}
	if b.Initrd != "" {
		opts = append(opts, vz.WithInitrd(b.Initrd))
	}
	l, err := vz.NewLinuxBootLoader(b.Kernel, opts...)
	if err != nil {
		return nil, fmt.Errorf("vz: linux boot loader for %s: %w", b.Kernel, err)
	}
	return l, nil
}

func efiBootLoader(b BootPlan) (vz.BootLoader, error) {
	store, err := efiVariableStore(b.EFIVarStore)
	if err != nil {
		return nil, err
	}
	l, err := vz.NewEFIBootLoader(vz.WithEFIVariableStore(store))
	if err != nil {
		return nil, fmt.Errorf("vz: EFI boot loader: %w", err)
	}
	return l, nil
}

// efiVariableStore reuses an existing store: creating one overwrites it, and
// that would drop the boot entries the guest installed.
func efiVariableStore(path string) (*vz.EFIVariableStore, error) {
	var opts []vz.NewEFIVariableStoreOption
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		opts = append(opts, vz.WithCreatingEFIVariableStore())
	}
	store, err := vz.NewEFIVariableStore(path, opts...)
	if err != nil {
		return nil, fmt.Errorf("vz: EFI variable store %s: %w", path, err)
	}
	return store, nil
}
