package shares

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/disks"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/mounts"
)

// Shares mounts the host's folders in the guest: 9p and virtiofs shares,
// their excluded folders, and the sync mounts' guest copies.
type Shares struct {
	guestos.Sys
}

// Mount mounts one share at its target, creating the folder; a target that
// is already mounted is left alone so a reconnecting host can repeat it.
func (s *Shares) Mount(ctx context.Context, m agent.MountRequest) error {
	if m.Tag == "" {
		return fmt.Errorf("mount %q: empty tag", m.Target)
	}
	if !path.IsAbs(m.Target) || path.Clean(m.Target) != m.Target || m.Target == "/" {
		return fmt.Errorf("mount target %q is not a clean absolute path other than /", m.Target)
	}
	var args []string
	switch m.Type {
	case mounts.Type9p:
		cache := "mmap"
		switch m.Cache {
		case "":
		case "mmap", "loose", "none":
			cache = m.Cache
		default:
			return fmt.Errorf("mount %q: 9p cache %q is not mmap, loose or none", m.Target, m.Cache)
		}
		opts := "trans=virtio,version=9p2000.L,msize=512000,cache=" + cache
		if m.ReadOnly {
			opts += ",ro"
		}
		args = []string{"-t", "9p", "-o", opts, m.Tag, m.Target}
	case agent.MountTypeSync:
		return s.mountSyncCopy(m)
	case mounts.TypeVirtiofs:
		args = []string{"-t", "virtiofs"}
		if m.ReadOnly {
			args = append(args, "-o", "ro")
		}
		args = append(args, m.Tag, m.Target)
	default:
		return fmt.Errorf("mount %q: type %q is not %q or %q", m.Target, m.Type, mounts.Type9p, mounts.TypeVirtiofs)
	}
	if err := CheckExcludes(m.Exclude); err != nil {
		return fmt.Errorf("mount %q: %w", m.Target, err)
	}
	e, ok, err := s.MountedAt(m.Target)
	if err != nil {
		return err
	}
	if !ok || e.Source != m.Tag {
		if err := os.MkdirAll(s.Path(m.Target), 0o755); err != nil {
			return fmt.Errorf("create mount point: %w", err)
		}
		if err := s.mountRetrying(ctx, m, args); err != nil {
			return err
		}
	}
	return s.mountExcludes(ctx, m)
}

// excludesDir holds the excluded subfolders of every share, on the data
// disk: they outlive a restart, and `delete --data` takes them away.
const excludesDir = disks.DataMount + "/excludes"

// excludeStore is where one share's excludes live: named after the host
// folder, so a share keeps its own whatever its place in the mount list.
func excludeStore(hostPath, target string) string {
	key := hostPath
	if key == "" {
		key = target
	}
	sum := sha256.Sum256([]byte(key))
	return path.Join(excludesDir, hex.EncodeToString(sum[:8]))
}

// mountExcludes bind-mounts each excluded subfolder of m from the data
// disk over the share. The mount point is created in the share (an empty
// folder the host sees); its contents stay in the guest.
func (s *Shares) mountExcludes(ctx context.Context, m agent.MountRequest) error {
	store := excludeStore(m.HostPath, m.Target)
	for _, ex := range m.Exclude {
		target := path.Join(m.Target, ex)
		if e, ok, err := s.MountedAt(target); err != nil {
			return err
		} else if ok && e.FSType != m.Type {
			continue // bound by an earlier request (a reconnecting host repeats it)
		}
		src := path.Join(store, ex)
		if err := os.MkdirAll(s.Path(src), 0o755); err != nil {
			return fmt.Errorf("exclude %s: create its folder on the data disk: %w", ex, err)
		}
		if err := os.MkdirAll(s.Path(target), 0o755); err != nil {
			return fmt.Errorf("exclude %s: create its mount point in the share%s: %w", ex, readOnlyHint(m), err)
		}
		if _, err := s.OS.Run(ctx, "mount", "--bind", src, target); err != nil {
			return fmt.Errorf("exclude %s: bind %s on %s: %w", ex, src, target, err)
		}
	}
	return nil
}

func readOnlyHint(m agent.MountRequest) string {
	if m.ReadOnly {
		return " (the share is read-only: create the folder on the host)"
	}
	return ""
}

// CheckExcludes refuses what config validation refuses, so a host that
// skipped it cannot make the guest bind outside the share.
func CheckExcludes(ex []string) error {
	for _, e := range ex {
		if e == "" || path.IsAbs(e) || path.Clean(e) != e || e == "." || e == ".." || strings.HasPrefix(e, "../") {
			return fmt.Errorf("exclude %q is not a clean path inside the share", e)
		}
	}
	return nil
}

// Mount retry timing: a share's virtio device may still be binding its
// driver when the host asks (modules load late in a TCG boot; 9p then says
// "no channels available for device"), so a failed mount is tried again
// for a while. A tag that never appears fails the same way, only later.
var (
	mountRetryFor   = 30 * time.Second
	mountRetryEvery = 500 * time.Millisecond
)

func (s *Shares) mountRetrying(ctx context.Context, m agent.MountRequest, args []string) error {
	deadline := time.Now().Add(mountRetryFor)
	for attempt := 1; ; attempt++ {
		_, err := s.OS.Run(ctx, "mount", args...)
		if err == nil {
			if attempt > 1 {
				s.Log.Info("share mounted after retries", "tag", m.Tag, "attempts", attempt)
			}
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("mount %s on %s (%d attempts): %w", m.Tag, m.Target, attempt, err)
		}
		s.Log.Info("share not ready; retrying", "tag", m.Tag, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(mountRetryEvery):
		}
	}
}
