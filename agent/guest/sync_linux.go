package guest

import (
	"context"
	"fmt"
	"net"

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

// watchSync reports changes in the sync copies the host names, one line
// per changed mount after a burst went quiet, until the stream ends.
func (s *Server) watchSync(ctx context.Context, st net.Conn, req agent.Request) {
	if req.SyncWatch == nil {
		_ = agent.Reply(st, fmt.Errorf("sync-watch request without mounts"))
		st.Close()
		return
	}
	var trees []watch.Tree
	for _, m := range req.SyncWatch.Mounts {
		if !syncmount.IDPattern.MatchString(m.ID) {
			_ = agent.Reply(st, fmt.Errorf("sync-watch: id %q is not accepted", m.ID))
			st.Close()
			return
		}
		if err := shares.CheckExcludes(m.Exclude); err != nil {
			_ = agent.Reply(st, fmt.Errorf("sync-watch %s: %w", m.ID, err))
			st.Close()
			return
		}
		trees = append(trees, watch.Tree{ID: m.ID, Dir: s.path(shares.SyncCopy(m.ID)), Exclude: m.Exclude})
	}
	agent.ServeSyncWatch(ctx, st, trees, s.log().With("service", "sync-watch"))
}
