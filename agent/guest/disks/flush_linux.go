package disks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vmdock/vmdock/agent/guest/guestos"
)

// Flush puts every written block on the disks before the VM is ended: it
// flushes each disk's file system once, never a share's. A plain sync(1)
// would flush a share too, and a share whose daemon died hangs it.
func (s *Disks) Flush(ctx context.Context) error {
	ms, err := guestos.ReadMounts(s.Path("/proc/self/mountinfo"))
	if err != nil {
		return err
	}
	var errs []error
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
