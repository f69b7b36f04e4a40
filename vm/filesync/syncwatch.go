package filesync

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/mounts/syncmount"
	"github.com/vmdock/vmdock/mounts/watch"
)

// Watchers tell the sync engine when to look: the guest agent watches the
// copies (inotify) and reports changes over the agent session; on a Linux
// host SyncMounts watches the host folders the same way (macOS hosts: the
// engine's own FSEvents watch). The engine does not poll the sides we
// watch; its backstop rescan catches what a watcher missed, waiting 10 s
// after each rescan, or 20 times as long as the rescan took when that is
// longer (mounts/syncmount).

// syncFlushWait bounds one change-triggered flush.
const syncFlushWait = 30 * time.Second

// flusher runs at most one flush per sync mount at a time; changes during
// a flush make one more flush after it, so the last change is never left
// to the poll.
type flusher struct {
	flush   func(ctx context.Context, id string) error
	mu      sync.Mutex
	running map[string]bool
	again   map[string]bool
}

func newFlusher(flush func(ctx context.Context, id string) error) *flusher {
	return &flusher{flush: flush, running: map[string]bool{}, again: map[string]bool{}}
}

func (f *flusher) kick(ctx context.Context, id string) {
	f.mu.Lock()
	if f.running[id] {
		f.again[id] = true
		f.mu.Unlock()
		return
	}
	f.running[id] = true
	f.mu.Unlock()
	go func() {
		for {
			fctx, cancel := context.WithTimeout(ctx, syncFlushWait)
			if err := f.flush(fctx, id); err != nil && ctx.Err() == nil {
				slog.Debug("sync: change-triggered flush", "id", id, "err", err)
			}
			cancel()
			f.mu.Lock()
			if !f.again[id] || ctx.Err() != nil {
				delete(f.running, id)
				delete(f.again, id)
				f.mu.Unlock()
				return
			}
			f.again[id] = false
			f.mu.Unlock()
		}
	}()
}

// watch starts both watchers for the sync mounts; they end with ctx.
func (s *SyncMounts) watch(ctx context.Context, m *syncmount.Manager, syncs []mounts.Sync) {
	f := newFlusher(m.Flush)
	go s.followGuestChanges(ctx, f, syncs)
	if watchHostFolders {
		watchHost(ctx, m, f, syncs)
	}
}

// followGuestChanges keeps a sync-watch stream open to the guest agent,
// across reconnects, and flushes each mount it names.
func (s *SyncMounts) followGuestChanges(ctx context.Context, f *flusher, syncs []mounts.Sync) {
	req := agent.SyncWatch{}
	for _, sy := range syncs {
		req.Mounts = append(req.Mounts, agent.SyncWatchMount{ID: sy.ID, Exclude: sy.Exclude})
	}
	for ctx.Err() == nil {
		c, err := s.cfg.Live(ctx)
		if err != nil {
			return
		}
		err = c.WatchSync(ctx, req, func(id string) { f.kick(ctx, id) })
		if ctx.Err() != nil {
			return
		}
		slog.Debug("sync: guest watch ended; reopening", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// watchHost watches the host folders of the sync mounts and flushes each
// mount that changed.
func watchHost(ctx context.Context, m *syncmount.Manager, f *flusher, syncs []mounts.Sync) {
	var trees []watch.Tree
	for _, sy := range syncs {
		trees = append(trees, watch.Tree{ID: sy.ID, Dir: sy.HostPath, Exclude: sy.Exclude})
	}
	w, err := watch.New(trees, watch.Options{Logger: slog.Default().With("service", "sync-watch")})
	if err != nil {
		slog.Warn("sync: cannot watch the host folders; changes are found by a full rescan every 2 s", "err", err)
		m.SetBackstop(syncmount.DefaultPollInterval)
		return
	}
	if w.Capped() {
		m.SetBackstop(syncmount.DefaultPollInterval) // part of a tree is unwatched
	}
	go func() {
		defer w.Close()
		w.Deliver(ctx, func(id string) bool { f.kick(ctx, id); return true })
	}()
}
