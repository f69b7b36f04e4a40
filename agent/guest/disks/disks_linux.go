package disks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vmdock/vmdock/agent/guest/guestos"
)

// Disks keeps the guest's disks: the data disk found, formatted, mounted
// and grown, the root grown, a reserve against a full disk, and the
// upkeep that trims freed blocks and reclaims cold page cache.
type Disks struct {
	guestos.Sys

	// upkeepMu serialises the upkeep rounds and a trim before a pause.
	upkeepMu    sync.Mutex
	upkeepState *upkeep
}

// The data disk: its mount point and its file system's label.
const (
	DataMount = "/var/lib/vmdock-data"
	DataLabel = "vmdock-data"
)

// SetupDataDisk finds the data disk link (or fallback) names and makes it
// ready: see dataDisk.
func (s *Disks) SetupDataDisk(ctx context.Context, link, fallback string) error {
	dev, err := s.dataDiskDevice(link, fallback)
	if err != nil {
		return err
	}
	return s.dataDisk(ctx, dev)
}

// GrowRoot lets ext4 take a disk that the host enlarged.
func (s *Disks) GrowRoot(ctx context.Context) error {
	m, ok, err := s.MountedAt("/")
	if err != nil {
		return err
	}
	if !ok || !strings.HasPrefix(m.Source, "/dev/") {
		return fmt.Errorf("no block device mounted at /")
	}
	if m.FSType != "ext4" {
		return fmt.Errorf("root filesystem is %s, only ext4 grows", m.FSType)
	}
	return s.resizeIfGrown(ctx, m.Source)
}

// dataDisk formats the data disk on first boot, mounts it, binds the
// docker and containerd folders onto it, so images survive a new root disk,
// and grows its file system when the host grew the disk.
func (s *Disks) dataDisk(ctx context.Context, dev string) error {
	if !strings.HasPrefix(dev, "/dev/") {
		return fmt.Errorf("data disk %q is not a /dev path", dev)
	}
	if err := s.formatIfBlank(ctx, dev); err != nil {
		return err
	}
	// mount(2) rather than mount(8): three processes fewer on every boot,
	// each a good part of a second under TCG, for mounts that need no
	// option mount(8) would work out.
	if err := s.MountOnceWith(DataMount, func() error { return s.OS.Mount(dev, DataMount, "ext4", false) }); err != nil {
		return err
	}
	for _, sub := range []string{"docker", "containerd"} {
		src, dst := filepath.Join(DataMount, sub), "/var/lib/"+sub
		if err := os.MkdirAll(s.Path(src), 0o710); err != nil {
			return err
		}
		if err := s.MountOnceWith(dst, func() error { return s.OS.Mount(src, dst, "", true) }); err != nil {
			return err
		}
	}
	if err := s.growFS(ctx, dev); err != nil {
		return err
	}
	return s.keepReserve()
}

// formatIfBlank makes an ext4 file system on dev when blkid finds no
// signature on it. A disk whose ext4 superblock reads is not blank: every
// boot but the first skips blkid, a process costing a good part of a
// second under TCG.
func (s *Disks) formatIfBlank(ctx context.Context, dev string) error {
	if _, err := ext4Room(s.Path(dev)); err == nil {
		return nil
	}
	_, err := s.OS.Run(ctx, "blkid", "-o", "value", "-s", "TYPE", dev)
	if guestos.ExitCode(err) != 2 { // 2: nothing found, a blank disk
		return err
	}
	// The inode tables are zeroed now, not by ext4lazyinit after the
	// mount: the drive offloads the zeroes (the host punches holes), and
	// a gigabyte written in the background would read as space freed to
	// the upkeep, which trims the whole new file system for nothing.
	_, err = s.OS.Run(ctx, "mkfs.ext4", "-q", "-E", "lazy_itable_init=0", "-L", DataLabel, dev)
	return err
}

// growFS lets a mounted ext4 take the space of a disk the host enlarged
// (`start --disk` with a bigger size). It runs every boot rather than on a
// flag, so a boot that died before growing catches up on the next one;
// the superblock tells whether there is new space.
func (s *Disks) growFS(ctx context.Context, dev string) error {
	if err := s.resizeIfGrown(ctx, dev); err != nil {
		return fmt.Errorf("grow the file system on %s: %w", dev, err)
	}
	return nil
}
