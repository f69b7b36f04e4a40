package bench

import (
	"context"
	"fmt"
	"time"
)

// SyncState is what Settle needs to know about one sync mount.
type SyncState struct {
	State    string // the engine's: "watching" when idle
	LastSync time.Time
}

// SettleQuiet is how long a sync mount must stay idle after a flush to
// count as settled: long enough for the echo a flush causes (its writes
// wake the other side's watcher, which asks for one more cycle) to start.
const SettleQuiet = 300 * time.Millisecond

// Settle flushes a sync mount and waits until its engine is quiet: idle,
// with no new cycle for quiet. The echo cycle is part of catching up, so a
// phase that starts after Settle is not measured against it.
func Settle(ctx context.Context, flush func(context.Context) error, state func(context.Context) (SyncState, error), quiet time.Duration) error {
	if err := flush(ctx); err != nil {
		return err
	}
	var last time.Time
	quietSince := time.Now()
	for first := true; ; first = false {
		st, err := state(ctx)
		if err != nil {
			return fmt.Errorf("sync state: %w", err)
		}
		now := time.Now()
		if first || st.State != "watching" || !st.LastSync.Equal(last) {
			last, quietSince = st.LastSync, now
		} else if now.Sub(quietSince) >= quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quiet / 6):
		}
	}
}
