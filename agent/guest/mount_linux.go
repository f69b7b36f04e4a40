package guest

import (
	"context"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/driver"
)

// mount mounts one share at its target, creating the folder; a target that
// is already mounted is left alone so a reconnecting host can repeat it.
func (s *Server) mount(ctx context.Context, m agent.MountRequest) error {
	if m.Tag == "" {
		return fmt.Errorf("mount %q: empty tag", m.Target)
	}
	if !path.IsAbs(m.Target) || path.Clean(m.Target) != m.Target || m.Target == "/" {
		return fmt.Errorf("mount target %q is not a clean absolute path other than /", m.Target)
	}
	var args []string
	switch m.Type {
	case driver.Mount9p:
		opts := "trans=virtio,version=9p2000.L,msize=512000,cache=mmap"
		if m.ReadOnly {
			opts += ",ro"
		}
		args = []string{"-t", "9p", "-o", opts, m.Tag, m.Target}
	case driver.MountVirtiofs:
		args = []string{"-t", "virtiofs"}
		if m.ReadOnly {
			args = append(args, "-o", "ro")
		}
		args = append(args, m.Tag, m.Target)
	default:
		return fmt.Errorf("mount %q: type %q is not %q or %q", m.Target, m.Type, driver.Mount9p, driver.MountVirtiofs)
	}
	if e, ok, err := s.mountedAt(m.Target); err != nil {
		return err
	} else if ok && e.Source == m.Tag {
		return nil
	}
	if err := os.MkdirAll(s.path(m.Target), 0o755); err != nil {
		return fmt.Errorf("create mount point: %w", err)
	}
	return s.mountRetrying(ctx, m, args)
}

// Mount retry timing: a share's virtio device may still be binding its
// driver when the host asks (modules load late in a TCG boot; 9p then says
// "no channels available for device"), so a failed mount is tried again
// for a while. A tag that never appears fails the same way, only later.
var (
	mountRetryFor   = 30 * time.Second
	mountRetryEvery = 500 * time.Millisecond
)

func (s *Server) mountRetrying(ctx context.Context, m agent.MountRequest, args []string) error {
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
