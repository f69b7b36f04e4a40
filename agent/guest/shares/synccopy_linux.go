package shares

import (
	"context"
	"fmt"
	"os"
	"path"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/disks"
	"github.com/vmdock/vmdock/mounts/syncmount"
)

// syncDir holds the guest copies of sync mounts and the sync engine's own
// state, on the data disk: the engine tells a new disk (no state) from a
// known one by that state, so both must live and die together.
const (
	syncDir     = agent.GuestSyncDir
	SyncDataDir = syncDir + "/.mutagen"
)

// SyncCopy is where the guest copy of sync mount id lives.
func SyncCopy(id string) string { return path.Join(syncDir, id) }

// DataDiskReady refuses sync work before the data disk is mounted: a copy
// or engine state written to the root disk would be hidden by it later.
func (s *Shares) DataDiskReady() error {
	if _, ok, err := s.MountedAt(disks.DataMount); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("the data disk is not mounted at %s", disks.DataMount)
	}
	return nil
}

// mountSyncCopy binds sync mount m's guest copy at its target, creating
// the copy (owned by the host user) on first use. A target that already
// has a mount from the data disk is left alone, so a reconnecting host can
// repeat the request.
func (s *Shares) mountSyncCopy(m agent.MountRequest) error {
	if !syncmount.IDPattern.MatchString(m.Tag) {
		return fmt.Errorf("sync mount %q: id %q is not accepted", m.Target, m.Tag)
	}
	if err := s.DataDiskReady(); err != nil {
		return fmt.Errorf("sync mount %q: %w", m.Target, err)
	}
	if e, ok, err := s.MountedAt(m.Target); err != nil {
		return err
	} else if ok && e.FSType != "9p" && e.FSType != "virtiofs" {
		return nil
	}
	copyDir := SyncCopy(m.Tag)
	if _, err := syncmount.PrepareGuestCopy(s.Path(copyDir), m.UID, m.GID); err != nil {
		return fmt.Errorf("sync mount %q: %w", m.Target, err)
	}
	if err := os.MkdirAll(s.Path(m.Target), 0o755); err != nil {
		return fmt.Errorf("sync mount %q: create the mount point: %w", m.Target, err)
	}
	if _, err := s.OS.Run(context.Background(), "mount", "--bind", copyDir, m.Target); err != nil {
		return fmt.Errorf("sync mount %q: bind %s: %w", m.Target, copyDir, err)
	}
	return nil
}
