package disks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// byIDPrefix is where udev links a virtio disk by its serial.
const byIDPrefix = "/dev/disk/by-id/virtio-"

// dataDiskDevice finds the data disk the host named by its by-id link:
// the device the link points to; else the virtio disk whose serial it
// names (udev has not made the link yet, or has no rule for it); else
// fallback, the name by attach order, with a log line, so a guest without
// the links still boots. A plain device name is taken as it is.
func (s *Disks) dataDiskDevice(link, fallback string) (string, error) {
	serial, ok := strings.CutPrefix(link, byIDPrefix)
	if !ok || serial == "" {
		return link, nil
	}
	dev, err := s.resolveLink(link)
	if err == nil {
		return dev, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("data disk link %s: %w", link, err)
	}
	if dev, ok := s.diskWithSerial(serial); ok {
		s.Logger().Info("data disk found by its serial; its by-id link is missing", "link", link, "device", dev)
		return dev, nil
	}
	if fallback == "" {
		return "", fmt.Errorf("data disk: no %s and no disk with serial %q", link, serial)
	}
	s.Logger().Warn("data disk: no by-id link and no disk with its serial; using the device by attach order", "link", link, "device", fallback)
	return fallback, nil
}

// resolveLink is the /dev name a /dev/disk/by-id link points to.
func (s *Disks) resolveLink(link string) (string, error) {
	target, err := os.Readlink(s.Path(link))
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(link), target)
	}
	if _, err := os.Stat(s.Path(target)); err != nil {
		return "", fmt.Errorf("points to %s: %w", target, err)
	}
	return target, nil
}

// diskWithSerial is the block device whose virtio serial is serial.
func (s *Disks) diskWithSerial(serial string) (string, bool) {
	des, err := os.ReadDir(s.Path("/sys/block"))
	if err != nil {
		return "", false
	}
	for _, de := range des {
		b, err := os.ReadFile(s.Path(filepath.Join("/sys/block", de.Name(), "serial")))
		if err == nil && strings.TrimSpace(string(b)) == serial {
			return "/dev/" + de.Name(), true
		}
	}
	return "", false
}
