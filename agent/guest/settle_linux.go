package guest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// settleTimeout bounds a settle: docker gives each container 10 s to stop.
const settleTimeout = 40 * time.Second

// settle gets the guest ready to be ended rather than powered off: a
// virtiofs share whose daemon died cannot be unmounted (the kernel waits
// for the daemon's answer to its last request), so systemd's power-off
// would hang on it until the host's stop timeout. Stopping the runtimes
// ends the containers cleanly; flushing each disk's file system puts every
// written block on the disks, so the next boot finds them as a power-off
// would have left them but for the journal replay. A plain sync(1) would
// flush the dead share too and hang the same way.
func (s *Server) settle(ctx context.Context) error {
	var errs []error
	if _, err := s.OS.Run(ctx, "systemctl", "stop", "docker.socket", "docker.service", "containerd.service"); err != nil {
		errs = append(errs, fmt.Errorf("stop the container runtimes: %w", err))
	}
	ms, err := readMounts(s.path("/proc/self/mountinfo"))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	flushed := map[string]bool{}
	for _, m := range ms {
		if !strings.HasPrefix(m.Source, "/dev/") || flushed[m.Source] {
			continue
		}
		flushed[m.Source] = true
		if _, err := s.OS.Run(ctx, "sync", "--file-system", m.Target); err != nil {
			errs = append(errs, fmt.Errorf("flush %s: %w", m.Target, err))
		}
	}
	return errors.Join(errs...)
}
