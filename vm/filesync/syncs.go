package filesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/mounts/syncmount"
	"github.com/vmdock/vmdock/vm/control"
)

// syncFlushTimeout bounds the flush before a graceful power-off: what the
// guest wrote last reaches the host, unless the engine cannot connect.
const syncFlushTimeout = 30 * time.Second

// errNotRunning answers the `vmdock sync` commands while no engine runs.
var errNotRunning = errors.New("the sync engine is not running (no sync mounts, or the instance is still starting)")

// SyncConfig is what SyncMounts needs of the instance and the host agent.
type SyncConfig struct {
	// DataDir is the engine's data folder in the instance folder
	// (store.Instance.SyncDataPath).
	DataDir string
	// Syncs are the config's sync mounts (mounts.Syncs).
	Syncs []mounts.Sync
	// Live returns the guest agent session once it is up, waiting through
	// a reconnect.
	Live func(ctx context.Context) (*agent.Client, error)
	// Events takes the first sync's progress notes (step "sync").
	Events *control.EventLog
	// Server says the other side is a remote instance's server: each
	// mount's copy is the server's folder at its guest path (not a copy
	// the guest binds there), owned by the SSH user.
	Server bool
}

// SyncMounts runs the sync mounts of one instance: the engine's sessions,
// the watches whose changes trigger its flushes, and the `vmdock sync`
// commands. A nil *SyncMounts is one that never runs.
type SyncMounts struct {
	cfg SyncConfig

	mu sync.Mutex
	m  *syncmount.Manager
	// stopWatch ends the change watchers of the sync mounts.
	stopWatch func()
}

// NewSyncMounts returns the sync mounts of cfg, not yet running.
func NewSyncMounts(cfg SyncConfig) *SyncMounts {
	return &SyncMounts{cfg: cfg}
}

// Start starts the sync engine for the config's sync mounts, drops the
// sessions of mounts no longer configured, and waits for every mount's
// first full sync, so `start` returns with the guest copies complete. A
// failed Start leaves nothing running.
func (s *SyncMounts) Start(ctx context.Context) error {
	if s == nil {
		return nil
	}
	dir := s.cfg.DataDir
	if len(s.cfg.Syncs) == 0 {
		if _, err := os.Stat(dir); err != nil {
			return nil // never had a sync mount
		}
	}
	m, err := syncmount.NewManager(syncmount.Options{
		DataDir: dir, Dial: s.dial, Logger: slog.Default().With("service", "sync"),
		// Our watchers report changes (syncwatch.go), so the engine does
		// not poll those sides; its backstop rescan catches what they
		// missed, waiting 10 s after a rescan or 20 times as long as the
		// rescan took, whichever is longer (syncmount.Options.Backstop).
		HostWatched: watchHostFolders, GuestWatched: true,
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.m = m
	s.mu.Unlock()
	if err := s.startSessions(ctx, m); err != nil {
		s.Stop(ctx) // a failed step is not undone by the boot sequence
		return err
	}
	return nil
}

// startSessions ensures a session per sync mount, drops the rest, and
// waits for the first full sync of each.
func (s *SyncMounts) startSessions(ctx context.Context, m *syncmount.Manager) error {
	syncs := s.cfg.Syncs
	keep := make([]string, 0, len(syncs))
	for _, sy := range syncs {
		if err := m.Ensure(ctx, syncMount(sy, s.cfg.Server)); err != nil {
			return fmt.Errorf("sync %s: %w", sy.HostPath, err)
		}
		keep = append(keep, sy.ID)
	}
	if err := m.Prune(ctx, keep); err != nil {
		return fmt.Errorf("sync: drop the sessions of removed mounts: %w", err)
	}
	if len(syncs) == 0 {
		return nil
	}
	if err := m.WaitInitial(ctx, s.progress()); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.stopWatch = cancel
	s.mu.Unlock()
	s.watch(wctx, m, syncs)
	return nil
}

// syncMount is the engine's view of a sync mount: the host folder against
// the guest copy on the data disk, owned in the guest by the host user;
// on a server, against the folder at the guest path, owned by the SSH
// user (whose ids are not the laptop's).
func syncMount(sy mounts.Sync, server bool) syncmount.Mount {
	m := syncmount.Mount{
		ID:        sy.ID,
		HostPath:  sy.HostPath,
		GuestPath: path.Join(agent.GuestSyncDir, sy.ID),
		Ignores:   syncmount.AnchoredIgnores(sy.Exclude),
		UID:       os.Getuid(),
		GID:       os.Getgid(),

		HostToGuest: sy.HostToGuest,
	}
	if server {
		m.GuestPath, m.UID, m.GID = sy.GuestPath, -1, -1
	}
	return m
}

// MountRequest asks the guest to bind sy's copy where the config put the
// mount.
func MountRequest(sy mounts.Sync) agent.MountRequest {
	return agent.MountRequest{Type: agent.MountTypeSync, Tag: sy.ID, Target: sy.GuestPath, HostPath: sy.HostPath, UID: os.Getuid(), GID: os.Getgid()}
}

// progress turns the first sync's progress into `start` notes, at most
// one every 2 s: the engine reports every state change.
func (s *SyncMounts) progress() func(syncmount.Progress) {
	var last time.Time
	return func(p syncmount.Progress) {
		if time.Since(last) < 2*time.Second && p.Done < p.Mounts {
			return
		}
		last = time.Now()
		s.cfg.Events.Emit("sync", control.EventNote, "", fmt.Sprintf("first sync: %d of %d mounts done, %d files (%.1f MiB) copied", p.Done, p.Mounts, p.Files, float64(p.Bytes)/(1<<20)))
	}
}

// dial opens a stream to the guest's sync service on the live agent
// session, waiting through a reconnect.
func (s *SyncMounts) dial(ctx context.Context) (net.Conn, error) {
	c, err := s.cfg.Live(ctx)
	if err != nil {
		return nil, err
	}
	return c.OpenSync(ctx)
}

// Stop ends the watchers and closes the engine; the sessions stay saved
// for the next start.
func (s *SyncMounts) Stop(context.Context) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	m, stopWatch := s.m, s.stopWatch
	s.m, s.stopWatch = nil, nil
	s.mu.Unlock()
	if stopWatch != nil {
		stopWatch()
	}
	if m == nil {
		return nil
	}
	return m.Close()
}

// manager is the running engine, nil while none runs.
func (s *SyncMounts) manager() *syncmount.Manager {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m
}

// FlushBeforeStop carries every pending change across before the guest
// powers off, so a file a container wrote just before `stop` is on the
// host. It first asks the guest agent c, which must answer within
// answerWithin, and reports one that does not (agentGone), which the
// power-off then need not ask again. What the stop should say goes to
// note.
func (s *SyncMounts) FlushBeforeStop(ctx context.Context, c *agent.Client, answerWithin time.Duration, note func(string)) (agentGone bool) {
	m := s.manager()
	if m == nil {
		return false
	}
	// A guest agent that is gone cannot serve the flush, and waiting for
	// the engine to give up would hold the stop for half a minute.
	if err := agentAnswers(ctx, c, answerWithin); err != nil {
		note(fmt.Sprintf("sync mounts: not flushed, the guest agent does not answer (%v); changes made in the guest since the last sync stay in its copy until the next start", err))
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, syncFlushTimeout)
	defer cancel()
	start := time.Now()
	// A paused mount (vmdock sync pause) is resumed: stop must not leave
	// what containers wrote behind in the guest.
	if err := m.ResumeAll(ctx); err != nil {
		slog.Warn("sync: resume before the last flush", "err", err)
	}
	if err := m.FlushAll(ctx); err != nil {
		note(fmt.Sprintf("sync mounts: the last flush failed (%v); changes made in the guest since the last sync stay in its copy until the next start", err))
		return false
	}
	slog.Info("sync mounts flushed before power-off", "took", time.Since(start).Round(time.Millisecond))
	return false
}

// Reconnect lets the sessions redial at once on a new agent session
// instead of after the engine's fixed 15 s back-off.
func (s *SyncMounts) Reconnect(ctx context.Context) {
	if m := s.manager(); m != nil {
		if err := m.Reconnect(ctx); err != nil && !errors.Is(err, syncmount.ErrClosed) {
			slog.Warn("sync: reconnect", "err", err)
		}
	}
}

// Flush, Pause, Resume and Reset serve `vmdock sync flush|pause|resume|reset
// [PATH]`: Flush and Reset the sync mount at hostPath (Flush: all of them
// when it is empty), Pause and Resume all of them.
func (s *SyncMounts) Flush(ctx context.Context, hostPath string) error {
	m := s.manager()
	if m == nil {
		return errNotRunning
	}
	if hostPath == "" {
		return m.FlushAll(ctx)
	}
	id, err := s.syncID(hostPath)
	if err != nil {
		return err
	}
	return m.Flush(ctx, id)
}

func (s *SyncMounts) Pause(ctx context.Context, _ string) error {
	m := s.manager()
	if m == nil {
		return errNotRunning
	}
	return m.PauseAll(ctx)
}

func (s *SyncMounts) Resume(ctx context.Context, _ string) error {
	m := s.manager()
	if m == nil {
		return errNotRunning
	}
	return m.ResumeAll(ctx)
}

func (s *SyncMounts) Reset(ctx context.Context, hostPath string) error {
	m := s.manager()
	if m == nil {
		return errNotRunning
	}
	id, err := s.syncID(hostPath)
	if err != nil {
		return err
	}
	return m.Reset(ctx, id)
}

// syncID finds the configured sync mount at hostPath (or inside it).
func (s *SyncMounts) syncID(hostPath string) (string, error) {
	abs, err := filepath.Abs(hostPath)
	if err != nil {
		return "", err
	}
	var known []string
	for _, sy := range s.cfg.Syncs {
		if rel, err := filepath.Rel(sy.HostPath, abs); err == nil && filepath.IsLocal(rel) || abs == sy.HostPath {
			return sy.ID, nil
		}
		known = append(known, sy.HostPath)
	}
	return "", fmt.Errorf("%s is not in a sync mount; sync mounts: %v", hostPath, known)
}

// Status is the sync part of the host agent's status; nil while the
// engine does not run.
func (s *SyncMounts) Status() []control.SyncStatus {
	m := s.manager()
	if m == nil {
		return nil
	}
	sts, err := m.Status()
	if err != nil {
		return nil
	}
	guestPaths := map[string]string{}
	for _, sy := range s.cfg.Syncs {
		guestPaths[sy.ID] = sy.GuestPath
	}
	out := make([]control.SyncStatus, 0, len(sts))
	for _, st := range sts {
		cs := control.SyncStatus{
			ID: st.ID, HostPath: st.HostPath, GuestPath: guestPaths[st.ID], State: st.State, Connected: st.Connected,
			LastError: st.LastError, LastSync: st.LastSync, LastFlush: st.LastFlush, Cycles: st.SuccessfulCycles,
			HostFiles: st.HostFiles, GuestFiles: st.GuestFiles, MoreConflicts: st.MoreConflicts,
		}
		for _, c := range st.Conflicts {
			cs.Conflicts = append(cs.Conflicts, control.SyncConflict{Path: c.Path, Host: c.Host, Guest: c.Guest})
		}
		for _, p := range st.Problems {
			cs.Problems = append(cs.Problems, fmt.Sprintf("%s %s: %s", p.Side, p.Path, p.Error))
		}
		out = append(out, cs)
	}
	return out
}

// agentAnswers asks the guest agent for its info within timeout. Like the
// host agent's power-off request it bounds the call itself: with the agent
// dead behind an open channel, opening the stream waits for yamux's write
// timeout.
func agentAnswers(ctx context.Context, c *agent.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	answer := make(chan error, 1)
	go func() {
		_, err := c.Info(ctx)
		answer <- err
	}()
	select {
	case err := <-answer:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %s", timeout)
	}
}
