package hostagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/mounts/syncmount"
	"github.com/vmdock/vmdock/vm/control"
)

// syncFlushTimeout bounds the flush before a graceful power-off: what the
// guest wrote last reaches the host, unless the engine cannot connect.
const syncFlushTimeout = 30 * time.Second

// stepSync starts the sync engine for the config's sync mounts, drops the
// sessions of mounts no longer configured, and waits for every mount's
// first full sync, so `start` returns with the guest copies complete.
func (ha *hostAgent) stepSync(ctx context.Context) error {
	syncs := mounts.Syncs(ha.cfg.Mounts)
	dir := ha.inst.SyncDataPath()
	if len(syncs) == 0 {
		if _, err := os.Stat(dir); err != nil {
			return nil // never had a sync mount
		}
	}
	m, err := syncmount.NewManager(syncmount.Options{
		DataDir: dir, Dial: ha.dialSync, Logger: slog.Default().With("service", "sync"),
		// Our watchers report changes (syncwatch.go), so the engine does
		// not poll those sides; its backstop rescan is every 10 s.
		HostWatched: watchHostFolders, GuestWatched: true,
	})
	if err != nil {
		return err
	}
	ha.mu.Lock()
	ha.sync = m
	ha.mu.Unlock()
	if err := ha.startSyncs(ctx, m, syncs); err != nil {
		ha.undoSync(ctx) // a failed step is not undone by the sequence
		return err
	}
	return nil
}

// startSyncs ensures a session per sync mount, drops the rest, and waits
// for the first full sync of each.
func (ha *hostAgent) startSyncs(ctx context.Context, m *syncmount.Manager, syncs []mounts.Sync) error {
	keep := make([]string, 0, len(syncs))
	for _, sy := range syncs {
		if err := m.Ensure(ctx, syncMount(sy)); err != nil {
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
	if err := m.WaitInitial(ctx, ha.syncProgress()); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(context.Background())
	ha.mu.Lock()
	ha.stopSyncWatch = cancel
	ha.mu.Unlock()
	ha.watchSyncs(wctx, m, syncs)
	return nil
}

// syncMount is the engine's view of a sync mount: the host folder against
// the guest copy on the data disk, owned in the guest by the host user.
func syncMount(sy mounts.Sync) syncmount.Mount {
	return syncmount.Mount{
		ID:        sy.ID,
		HostPath:  sy.HostPath,
		GuestPath: path.Join(agent.GuestSyncDir, sy.ID),
		Ignores:   syncmount.AnchoredIgnores(sy.Exclude),
		UID:       os.Getuid(),
		GID:       os.Getgid(),
	}
}

// syncMountRequest asks the guest to bind sy's copy where the config put
// the mount.
func syncMountRequest(sy mounts.Sync) agent.MountRequest {
	return agent.MountRequest{Type: agent.MountTypeSync, Tag: sy.ID, Target: sy.GuestPath, HostPath: sy.HostPath, UID: os.Getuid(), GID: os.Getgid()}
}

// syncProgress turns the first sync's progress into `start` notes, at most
// one every 2 s: the engine reports every state change.
func (ha *hostAgent) syncProgress() func(syncmount.Progress) {
	var last time.Time
	return func(p syncmount.Progress) {
		if time.Since(last) < 2*time.Second && p.Done < p.Mounts {
			return
		}
		last = time.Now()
		ha.events.Emit("sync", control.EventNote, "", fmt.Sprintf("first sync: %d of %d mounts done, %d files (%.1f MiB) copied", p.Done, p.Mounts, p.Files, float64(p.Bytes)/(1<<20)))
	}
}

// dialSync opens a stream to the guest's sync service on the live agent
// session, waiting through a reconnect.
func (ha *hostAgent) dialSync(ctx context.Context) (net.Conn, error) {
	c, err := ha.link.live(ctx)
	if err != nil {
		return nil, err
	}
	return c.OpenSync(ctx)
}

func (ha *hostAgent) undoSync(context.Context) error {
	ha.mu.Lock()
	m, stopWatch := ha.sync, ha.stopSyncWatch
	ha.sync, ha.stopSyncWatch = nil, nil
	ha.mu.Unlock()
	if stopWatch != nil {
		stopWatch()
	}
	if m == nil {
		return nil
	}
	return m.Close()
}

func (ha *hostAgent) syncManager() *syncmount.Manager {
	ha.mu.Lock()
	defer ha.mu.Unlock()
	return ha.sync
}

// flushSync carries every pending change across before the guest powers
// off, so a file a container wrote just before `stop` is on the host. It
// reports a guest agent that does not answer, which the power-off then
// need not ask again.
func (ha *hostAgent) flushSync(ctx context.Context, c *agent.Client) (agentGone bool) {
	m := ha.syncManager()
	if m == nil {
		return false
	}
	// A guest agent that is gone cannot serve the flush, and waiting for
	// the engine to give up would hold the stop for half a minute.
	if err := agentAnswers(ctx, c, ha.opts.AgentAnswer); err != nil {
		ha.stopNote(fmt.Sprintf("sync mounts: not flushed, the guest agent does not answer (%v); changes made in the guest since the last sync stay in its copy until the next start", err))
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
		ha.stopNote(fmt.Sprintf("sync mounts: the last flush failed (%v); changes made in the guest since the last sync stay in its copy until the next start", err))
		return false
	}
	slog.Info("sync mounts flushed before power-off", "took", time.Since(start).Round(time.Millisecond))
	return false
}

// reconnectSync lets the sessions redial at once on a new agent session
// instead of after the engine's fixed 15 s back-off.
func (ha *hostAgent) reconnectSync(ctx context.Context) {
	if m := ha.syncManager(); m != nil {
		if err := m.Reconnect(ctx); err != nil && !errors.Is(err, syncmount.ErrClosed) {
			slog.Warn("sync: reconnect", "err", err)
		}
	}
}

// syncFlush and syncReset serve `vmdock sync flush|reset [PATH]`.
func (ha *hostAgent) syncFlush(ctx context.Context, hostPath string) error {
	m := ha.syncManager()
	if m == nil {
		return errors.New("the sync engine is not running (no sync mounts, or the instance is still starting)")
	}
	if hostPath == "" {
		return m.FlushAll(ctx)
	}
	id, err := ha.syncID(hostPath)
	if err != nil {
		return err
	}
	return m.Flush(ctx, id)
}

func (ha *hostAgent) syncPause(ctx context.Context, _ string) error {
	m := ha.syncManager()
	if m == nil {
		return errors.New("the sync engine is not running (no sync mounts, or the instance is still starting)")
	}
	return m.PauseAll(ctx)
}

func (ha *hostAgent) syncResume(ctx context.Context, _ string) error {
	m := ha.syncManager()
	if m == nil {
		return errors.New("the sync engine is not running (no sync mounts, or the instance is still starting)")
	}
	return m.ResumeAll(ctx)
}

func (ha *hostAgent) syncReset(ctx context.Context, hostPath string) error {
	m := ha.syncManager()
	if m == nil {
		return errors.New("the sync engine is not running (no sync mounts, or the instance is still starting)")
	}
	id, err := ha.syncID(hostPath)
	if err != nil {
		return err
	}
	return m.Reset(ctx, id)
}

// syncID finds the configured sync mount at hostPath (or inside it).
func (ha *hostAgent) syncID(hostPath string) (string, error) {
	abs, err := filepath.Abs(hostPath)
	if err != nil {
		return "", err
	}
	var known []string
	for _, sy := range mounts.Syncs(ha.cfg.Mounts) {
		if rel, err := filepath.Rel(sy.HostPath, abs); err == nil && filepath.IsLocal(rel) || abs == sy.HostPath {
			return sy.ID, nil
		}
		known = append(known, sy.HostPath)
	}
	return "", fmt.Errorf("%s is not in a sync mount; sync mounts: %v", hostPath, known)
}

// syncStatuses is the sync part of the host agent's status.
func (ha *hostAgent) syncStatuses() []control.SyncStatus {
	m := ha.syncManager()
	if m == nil {
		return nil
	}
	sts, err := m.Status()
	if err != nil {
		return nil
	}
	guestPaths := map[string]string{}
	for _, sy := range mounts.Syncs(ha.cfg.Mounts) {
		guestPaths[sy.ID] = sy.GuestPath
	}
	out := make([]control.SyncStatus, 0, len(sts))
	for _, s := range sts {
		cs := control.SyncStatus{
			ID: s.ID, HostPath: s.HostPath, GuestPath: guestPaths[s.ID], State: s.State, Connected: s.Connected,
			LastError: s.LastError, LastSync: s.LastSync, LastFlush: s.LastFlush, Cycles: s.SuccessfulCycles,
			HostFiles: s.HostFiles, GuestFiles: s.GuestFiles, MoreConflicts: s.MoreConflicts,
		}
		for _, c := range s.Conflicts {
			cs.Conflicts = append(cs.Conflicts, control.SyncConflict{Path: c.Path, Host: c.Host, Guest: c.Guest})
		}
		for _, p := range s.Problems {
			cs.Problems = append(cs.Problems, fmt.Sprintf("%s %s: %s", p.Side, p.Path, p.Error))
		}
		out = append(out, cs)
	}
	return out
}

// agentAnswers asks the guest agent for its info within timeout. Like
// askPowerOff it bounds the call itself: with the agent dead behind an open
// channel, opening the stream waits for yamux's write timeout.
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
