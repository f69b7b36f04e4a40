package guest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// fuseConnections is where the kernel lists FUSE connections (fusectl).
const fuseConnections = "/sys/fs/fuse/connections"

// abortShares ends the FUSE connections of the virtiofs shares mounted at
// targets, whose host daemon died. Without it every request on such a
// share waits for an answer no one will send, the power-off's unmount
// among them (systemd's 90 s, then the host's kill); once ended, each
// fails at once. Only virtiofs mounts are touched.
func (s *Server) abortShares(targets []string) error {
	ms, err := readMounts(s.path("/proc/self/mountinfo"))
	if err != nil {
		return err
	}
	if err := s.mountFusectl(); err != nil {
		return err
	}
	var errs []error
	for _, t := range targets {
		conn := ""
		for _, m := range ms {
			if m.Target == t && m.FSType == "virtiofs" {
				conn = fuseConnName(m.Dev)
			}
		}
		if conn == "" {
			errs = append(errs, fmt.Errorf("share %s: no virtiofs mount there", t))
			continue
		}
		if err := os.WriteFile(s.path(filepath.Join(fuseConnections, conn, "abort")), []byte("1"), 0o200); err != nil {
			errs = append(errs, fmt.Errorf("share %s: end its connection: %w", t, err))
			continue
		}
		s.log().Warn("ended the connection of a share whose host daemon died", "share", t)
	}
	return errors.Join(errs...)
}

// mountFusectl mounts fusectl where systemd normally has, if it is not
// there (a test's root holds its own copy).
func (s *Server) mountFusectl() error {
	if s.Root != "" {
		return nil
	}
	if m, ok, err := s.mountedAt(fuseConnections); err == nil && ok && m.FSType == "fusectl" {
		return nil
	}
	if err := unix.Mount("fusectl", fuseConnections, "fusectl", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount fusectl: %w", err)
	}
	return nil
}

// fuseConnName is fusectl's name for the connection of the file system on
// device dev ("major:minor"): the kernel's device number in decimal.
func fuseConnName(dev string) string {
	ma, mi, ok := strings.Cut(dev, ":")
	major, err1 := strconv.ParseUint(ma, 10, 32)
	minor, err2 := strconv.ParseUint(mi, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return ""
	}
	return strconv.FormatUint(major<<20|minor, 10)
}
