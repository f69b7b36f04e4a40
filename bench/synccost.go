package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vmdock/vmdock/bench/probe"
)

// syncCost measures what a sync mount costs: the time to carry a new
// tree of n files (2,000 quick, 20,000 full) from the host into the guest,
// and the host and guest agents' CPU while that tree sits idle.
func (r *runner) syncCost(ctx context.Context) error {
	if r.env.SyncFlush == nil {
		return fmt.Errorf("no sync flush hook")
	}
	n := 20000
	if r.opt.Quick {
		n = 2000
	}
	for _, s := range r.env.Shares {
		if s.Type != SyncMount {
			continue
		}
		dir := filepath.Join(s.Path, ".vmdock-bench", "initial")
		_ = os.RemoveAll(dir)
		if err := r.env.SyncFlush(ctx, s.Path); err != nil {
			return fmt.Errorf("sync flush before: %w", err)
		}
		if _, err := probe.MakeTree(dir, n, 7); err != nil {
			return err
		}
		start := time.Now()
		if err := r.env.SyncFlush(ctx, s.Path); err != nil {
			return fmt.Errorf("sync flush: %w", err)
		}
		r.rep.Add(Result{Section: "propagate", Metric: fmt.Sprintf("sync a new tree of %d files into the guest", n), Variant: "sync mount", Value: time.Since(start).Seconds(), Unit: "s", Better: Lower})
		r.syncIdleCPU(ctx, n)
		_ = os.RemoveAll(dir)
		_ = r.env.SyncFlush(ctx, s.Path)
	}
	return nil
}

// syncIdleCPU reports the agents' CPU while n synced files sit idle, in
// % of one core: the guest's from the memory section's idle probe, the
// host agent's over the same window.
func (r *runner) syncIdleCPU(ctx context.Context, n int) {
	metric := fmt.Sprintf("idle CPU with %d synced files", n)
	hostBefore, herr := hostCPU(r.env.HostAgentPID)
	start := time.Now()
	guest, gerr := r.idleCPU(ctx)
	if gerr == nil {
		r.rep.Add(Result{Section: "propagate", Metric: metric, Variant: "guest agent", Value: guest, Unit: "%", Better: Lower})
	} else {
		r.rep.Skipped = append(r.rep.Skipped, "guest agent CPU: "+gerr.Error())
	}
	if herr == nil {
		if after, err := hostCPU(r.env.HostAgentPID); err == nil {
			r.rep.Add(Result{Section: "propagate", Metric: metric, Variant: "host agent", Value: 100 * (after - hostBefore).Seconds() / time.Since(start).Seconds(), Unit: "%", Better: Lower})
		}
	} else {
		r.rep.Skipped = append(r.rep.Skipped, "host agent CPU: "+herr.Error())
	}
}
