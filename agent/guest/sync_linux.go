package guest

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/vmdock/vmdock/agent/guest/shares"
	"github.com/vmdock/vmdock/mounts/watch"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts/syncmount"
)

// serveSync answers an OpSync stream: after the OK, the stream belongs to
// the sync engine's endpoint server until the host closes it.
func (s *Server) serveSync(ctx context.Context, st net.Conn) {
	if err := s.rooms().shares.DataDiskReady(); err != nil {
		_ = agent.Reply(st, fmt.Errorf("sync: %w", err))
		st.Close()
		return
	}
	if err := agent.Reply(st, nil); err != nil {
		st.Close()
		return
	}
	if err := syncmount.Serve(ctx, st, syncmount.GuestOptions{DataDir: s.path(shares.SyncDataDir), Logger: s.log().With("service", "sync")}); err != nil {
		s.log().Info("sync stream ended", "err", err)
	}
}

// A report makes the host run a cycle, and a cycle scans the whole guest
// copy and reads what changed: work that competes with the container still
// writing. So a burst (an install, a build) is reported once it pauses,
// or every guestSyncMaxDelay while it lasts, and the watcher wakes every
// guestSyncBurstPause in it instead of every 20 ms.
const (
	guestSyncQuiet      = 250 * time.Millisecond
	guestSyncBurstPause = 200 * time.Millisecond
	guestSyncMaxDelay   = 5 * time.Second
)

// watchSync reports changes in the sync copies the host names, one line
// per changed mount after a burst went quiet, until the stream ends.
func (s *Server) watchSync(ctx context.Context, st net.Conn, req agent.Request) {
	defer st.Close()
	if req.SyncWatch == nil {
		_ = agent.Reply(st, fmt.Errorf("sync-watch request without mounts"))
		return
	}
	var trees []watch.Tree
	for _, m := range req.SyncWatch.Mounts {
		if !shares.SyncIDPattern.MatchString(m.ID) {
			_ = agent.Reply(st, fmt.Errorf("sync-watch: id %q is not accepted", m.ID))
			return
		}
		if err := shares.CheckExcludes(m.Exclude); err != nil {
			_ = agent.Reply(st, fmt.Errorf("sync-watch %s: %w", m.ID, err))
			return
		}
		trees = append(trees, watch.Tree{ID: m.ID, Dir: s.path(shares.SyncCopy(m.ID)), Exclude: m.Exclude})
	}
	w, err := watch.New(trees, watch.Options{Quiet: guestSyncQuiet, BurstPause: guestSyncBurstPause, MaxDelay: guestSyncMaxDelay, Logger: s.log().With("service", "sync-watch")})
	if err != nil {
		_ = agent.Reply(st, err)
		return
	}
	defer w.Close()
	if err := agent.Reply(st, nil); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the host closing the stream ends the watch
		io.Copy(io.Discard, st)
		cancel()
	}()
	w.Deliver(ctx, func(id string) bool {
		return agent.WriteJSONLine(st, agent.SyncChange{ID: id}) == nil
	})
}
