package guest

import (
	"context"
	"fmt"
	"os"
	"path"

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
	if _, err := s.OS.Run(ctx, "mount", args...); err != nil {
		return fmt.Errorf("mount %s on %s: %w", m.Tag, m.Target, err)
	}
	return nil
}
