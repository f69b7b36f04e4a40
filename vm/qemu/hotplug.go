package qemu

// Bench scratch disks: `vmdock bench --sections sync` compares the
// --disk-sync modes inside one running VM, so it hot-plugs one small disk
// per mode, each with the QEMU cache mode that mode gives the boot disks.
// q35's and virt's root bus take no hot-plug, so every VM gets ScratchSlots
// empty PCIe root ports at boot (scratchPortArgs) for these disks to land in.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmdock/vmdock/internal/sparsefile"
)

// ScratchSlots is how many scratch disks a VM can hold at once: one per
// --disk-sync mode.
const ScratchSlots = 3

// ScratchSize is the size of a scratch disk file; sparse, so only what the
// bench writes takes host space.
const ScratchSize = 256 << 20

// scratchDetachTimeout bounds the wait for the guest to release a disk
// after device_del (ACPI or PCIe native unplug needs the guest's answer).
var scratchDetachTimeout = 30 * time.Second

func scratchPortID(slot int) string { return fmt.Sprintf("scratchport%d", slot) }
func scratchNode(slot int) string   { return fmt.Sprintf("scratch%d", slot) }
func scratchDevice(slot int) string { return fmt.Sprintf("scratchdev%d", slot) }

// ScratchSerial is the virtio serial of the disk in slot; the guest finds
// the disk by it (/sys/block/vdX/serial), whatever vdX it became.
func ScratchSerial(slot int) string { return fmt.Sprintf("vmdock-scratch%d", slot) }

// ScratchPath is the host file behind the disk in slot.
func ScratchPath(dir string, slot int) string {
	return filepath.Join(dir, fmt.Sprintf("scratch%d.raw", slot))
}

// scratchPortArgs are the empty root ports the scratch disks are plugged
// into. They belong last in Args: devices before them keep their PCI
// slots, so the guest's interface names do not change. Chassis numbers
// must be unique per port; 0x40 keeps clear of any port a future device
// group might add from 1 up.
func scratchPortArgs() ([]string, error) {
	var a []string
	for i := 0; i < ScratchSlots; i++ {
		a = append(a, "-device", fmt.Sprintf("pcie-root-port,id=%s,chassis=%d,slot=0", scratchPortID(i), 0x40+i))
	}
	return a, nil
}

// blockdevCache is the blockdev-add form of the -drive cache mode that
// driveCache picks for diskSync, so a scratch disk flushes exactly as the
// boot disks of a VM started with that mode.
func blockdevCache(diskSync string) (map[string]bool, error) {
	mode, err := driveCache(diskSync)
	if err != nil {
		return nil, err
	}
	switch mode {
	case "writeback":
		return map[string]bool{"direct": false, "no-flush": false}, nil
	case "unsafe":
		return map[string]bool{"direct": false, "no-flush": true}, nil
	}
	return nil, fmt.Errorf("cache mode %q has no blockdev form", mode)
}

// scratchCommands is the QMP sequence that attaches a scratch disk: a raw
// node over the file, then a virtio-blk device on the slot's root port.
// write-cache=on is what -drive cache=writeback/unsafe give the boot disks;
// a device on a bare node would otherwise default to writethrough.
func scratchCommands(path string, slot int, diskSync string) ([]qmpCommand, error) {
	if slot < 0 || slot >= ScratchSlots {
		return nil, fmt.Errorf("scratch slot %d: accepted are 0 to %d", slot, ScratchSlots-1)
	}
	cache, err := blockdevCache(diskSync)
	if err != nil {
		return nil, err
	}
	node := map[string]any{
		"driver": "raw", "node-name": scratchNode(slot), "cache": cache,
		"discard": "unmap", "detect-zeroes": "unmap",
		"file": map[string]any{"driver": "file", "filename": path, "cache": cache},
	}
	dev := map[string]any{
		"driver": "virtio-blk-pci", "id": scratchDevice(slot), "drive": scratchNode(slot),
		"bus": scratchPortID(slot), "serial": ScratchSerial(slot), "write-cache": "on",
	}
	return []qmpCommand{{"blockdev-add", node}, {"device_add", dev}}, nil
}

type qmpCommand struct {
	Name string
	Args any
}

// AttachScratch creates the slot's sparse file in the instance folder and
// hot-plugs it with the cache mode of diskSync; it returns the serial the
// guest sees. A disk left in the slot by an earlier run is detached first.
func (m *Machine) AttachScratch(ctx context.Context, slot int, diskSync string) (string, error) {
	if m.exited() {
		return "", errors.New("attach scratch disk: the VM is not running")
	}
	path := ScratchPath(m.spec.Dir, slot)
	cmds, err := scratchCommands(path, slot, diskSync)
	if err != nil {
		return "", err
	}
	if err := m.DetachScratch(ctx, slot); err != nil {
		return "", err
	}
	if err := sparsefile.New(path, os.O_TRUNC, 0o600, ScratchSize); err != nil {
		return "", fmt.Errorf("create scratch disk %s: %w", path, err)
	}
	for i, c := range cmds {
		if err := m.qmp.execute(ctx, c.Name, c.Args, nil); err != nil {
			if i > 0 {
				_ = m.qmp.execute(ctx, "blockdev-del", map[string]any{"node-name": scratchNode(slot)}, nil)
			}
			_ = os.Remove(path)
			return "", fmt.Errorf("attach scratch disk %d (disk-sync %s): %w", slot, diskSync, err)
		}
	}
	m.log.Info("scratch disk attached", "slot", slot, "diskSync", diskSync, "path", path)
	return ScratchSerial(slot), nil
}

// DetachScratch unplugs the slot's disk, waits until QEMU has let go of
// the node, and removes the file. An empty slot is not an error. The guest
// must have unmounted the disk: the unplug waits for the guest's consent.
func (m *Machine) DetachScratch(ctx context.Context, slot int) error {
	if slot < 0 || slot >= ScratchSlots {
		return fmt.Errorf("scratch slot %d: accepted are 0 to %d", slot, ScratchSlots-1)
	}
	err := m.qmp.execute(ctx, "device_del", map[string]any{"id": scratchDevice(slot)}, nil)
	if err != nil && !isQMPClass(err, "DeviceNotFound") && !unplugUnderWay(err) {
		return fmt.Errorf("detach scratch disk %d: %w", slot, err)
	}
	if err := m.deleteScratchNode(ctx, slot); err != nil {
		return err
	}
	if err := os.Remove(ScratchPath(m.spec.Dir, slot)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("detach scratch disk %d: %w", slot, err)
	}
	return nil
}

// deleteScratchNode retries blockdev-del until the unplugged device has
// released the node; QMP has no synchronous device_del.
func (m *Machine) deleteScratchNode(ctx context.Context, slot int) error {
	ctx, cancel := context.WithTimeout(ctx, scratchDetachTimeout)
	defer cancel()
	for {
		err := m.qmp.execute(ctx, "blockdev-del", map[string]any{"node-name": scratchNode(slot)}, nil)
		if err == nil || isNoSuchNode(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("detach scratch disk %d: the guest did not release it within %s (still mounted?): %w", slot, scratchDetachTimeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func isQMPClass(err error, class string) bool {
	var qe *qmpError
	return errors.As(err, &qe) && qe.Class == class
}

// isNoSuchNode is blockdev-del's answer for a node that is not there;
// QEMU reports it as a GenericError, so the text is all there is.
func isNoSuchNode(err error) bool {
	var qe *qmpError
	return errors.As(err, &qe) && strings.Contains(qe.Desc, "Failed to find node")
}

// unplugUnderWay is device_del's answer while an earlier unplug of the
// same device waits for the guest: waiting on is all there is to do.
func unplugUnderWay(err error) bool {
	var qe *qmpError
	return errors.As(err, &qe) && strings.Contains(qe.Desc, "in the process of unplug")
}
