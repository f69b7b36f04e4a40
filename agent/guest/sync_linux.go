package guest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"regexp"
	"time"

	"github.com/vmdock/vmdock/agent/guest/disks"
	"github.com/vmdock/vmdock/mounts/watch"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts/syncmount"
)

// syncDir holds the guest copies of sync mounts and the sync engine's own
// state, on the data disk: the engine tells a new disk (no state) from a
// known one by that state, so both must live and die together.
const (
	syncDir     = agent.GuestSyncDir
	syncDataDir = syncDir + "/.mutagen"
)

var syncIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

// syncCopy is where the guest copy of sync mount id lives.
func syncCopy(id string) string { return path.Join(syncDir, id) }

// dataDiskReady refuses sync work before the data disk is mounted: a copy
// or engine state written to the root disk would be hidden by it later.
func (s *Server) dataDiskReady() error {
	if _, ok, err := s.sys().MountedAt(disks.DataMount); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("the data disk is not mounted at %s", disks.DataMount)
	}
	return nil
}

// mountSyncCopy binds sync mount m's guest copy at its target, creating
// the copy (owned by the host user) on first use. A target that already
// has a mount from the data disk is left alone, so a reconnecting host can
// repeat the request.
func (s *Server) mountSyncCopy(m agent.MountRequest) error {
	if !syncIDPattern.MatchString(m.Tag) {
		return fmt.Errorf("sync mount %q: id %q is not accepted", m.Target, m.Tag)
	}
	if err := s.dataDiskReady(); err != nil {
		return fmt.Errorf("sync mount %q: %w", m.Target, err)
	}
	if e, ok, err := s.sys().MountedAt(m.Target); err != nil {
		return err
	} else if ok && e.FSType != "9p" && e.FSType != "virtiofs" {
		return nil
	}
	copyDir := syncCopy(m.Tag)
	if _, err := syncmount.PrepareGuestCopy(s.path(copyDir), m.UID, m.GID); err != nil {
		return fmt.Errorf("sync mount %q: %w", m.Target, err)
	}
	if err := os.MkdirAll(s.path(m.Target), 0o755); err != nil {
		return fmt.Errorf("sync mount %q: create the mount point: %w", m.Target, err)
	}
	if _, err := s.OS.Run(context.Background(), "mount", "--bind", copyDir, m.Target); err != nil {
		return fmt.Errorf("sync mount %q: bind %s: %w", m.Target, copyDir, err)
	}
	return nil
}

// serveSync answers an OpSync stream: after the OK, the stream belongs to
// the sync engine's endpoint server until the host closes it.
func (s *Server) serveSync(ctx context.Context, st net.Conn) {
	if err := s.dataDiskReady(); err != nil {
		_ = agent.Reply(st, fmt.Errorf("sync: %w", err))
		st.Close()
		return
	}
	if err := agent.Reply(st, nil); err != nil {
		st.Close()
		return
	}
	if err := syncmount.Serve(ctx, st, syncmount.GuestOptions{DataDir: s.path(syncDataDir), Logger: s.log().With("service", "sync")}); err != nil {
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
		if !syncIDPattern.MatchString(m.ID) {
			_ = agent.Reply(st, fmt.Errorf("sync-watch: id %q is not accepted", m.ID))
			return
		}
		if err := checkExcludes(m.Exclude); err != nil {
			_ = agent.Reply(st, fmt.Errorf("sync-watch %s: %w", m.ID, err))
			return
		}
		trees = append(trees, watch.Tree{ID: m.ID, Dir: s.path(syncCopy(m.ID)), Exclude: m.Exclude})
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
