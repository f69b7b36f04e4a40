package guest

import (
	"context"
	"errors"
	"time"

	"github.com/vmdock/vmdock/agent/guest/runtime"
)

// The settle's two budgets, one after the other. Stopping the runtimes
// waits for each container's stop timeout (docker's default is 10 s, a
// container may ask for more); the flush gets its own time after that, so
// a stop that used all of its budget still leaves the disks flushed. The
// host agent waits for both (its SettleTimeout).
const (
	settleStopBudget  = 35 * time.Second
	settleFlushBudget = 15 * time.Second
)

// settle gets the guest ready to be ended rather than powered off: a
// virtiofs share whose daemon died cannot be unmounted (the kernel waits
// for the daemon's answer to its last request), so systemd's power-off
// would hang on it until the host's stop timeout. Stopping the runtimes
// ends the containers cleanly; flushing each disk's file system puts every
// written block on the disks, so the next boot finds them as a power-off
// would have left them but for the journal replay.
//
// The flush runs even when ctx ended during the stop: the VM is ended
// right after the settle whatever happens, and unflushed disks are the
// worse outcome.
func (s *Server) settle(ctx context.Context) error {
	stopCtx, cancel := context.WithTimeout(ctx, settleStopBudget)
	stopErr := runtime.StopAll(stopCtx, s.OS)
	cancel()
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleFlushBudget)
	defer cancel()
	return errors.Join(stopErr, s.rooms().disks.Flush(flushCtx))
}
