package syncmount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mutagen-io/mutagen/pkg/selection"
	"github.com/mutagen-io/mutagen/pkg/synchronization"
)

// DefaultPollInterval is how often Mutagen rescans a side that it watches
// itself but incompletely (Linux without Mutagen's SSPL parts polls; on
// macOS FSEvents drives it and the interval only re-arms the watch).
const DefaultPollInterval = 2 * time.Second

// DefaultBackstop is the period of the full rescan behind the caller's own
// watchers (HostWatched, GuestWatched). Each rescan stats every file of both
// sides, so it is kept rare: it only catches what a watcher missed (a
// capped watch, events lost under load).
const DefaultBackstop = 10 * time.Second

// ErrClosed is returned by the methods of a closed Manager.
var ErrClosed = errors.New("sync manager is closed")

// Options configure the host side.
type Options struct {
	// DataDir is Mutagen's data directory on the host (sessions, sync
	// history, caches, staging). Put it in the instance folder, e.g.
	// <instance>/sync; it must be absolute. Sessions live as long as it does.
	DataDir string
	// Dial opens a new stream to the guest's sync service. Each call must
	// return a fresh stream that the guest hands to Serve.
	Dial DialFunc
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// PollInterval is the rescan period of a side that Mutagen watches
	// itself, rounded up to whole seconds; zero means DefaultPollInterval.
	PollInterval time.Duration
	// HostWatched and GuestWatched say that the caller watches that side
	// and calls Flush when it changes. Mutagen then leaves the side alone
	// between flushes instead of polling it: a poll is a full scan, and
	// scanning a big tree every 2 s costs more CPU than the work it syncs.
	HostWatched, GuestWatched bool
	// Backstop is the period of a full rescan (a flush of every session)
	// while a side is watched by the caller; zero means DefaultBackstop.
	// SetBackstop changes it, e.g. when a watcher could not start.
	Backstop time.Duration
}

// Manager runs the host side of all sync mounts of one instance. Only one
// Manager may be open per process (see the package doc).
type Manager struct {
	log      *slog.Logger
	dial     DialFunc
	mgr      *synchronization.Manager
	watch    watchPlan
	backstop chan time.Duration
	release  func()
	ctx      context.Context // ends with Close
	cancel   context.CancelFunc
	done     chan struct{}
	workers  sync.WaitGroup

	mu     sync.Mutex
	closed bool
	info   map[string]*sessionInfo // by Mutagen session identifier
}

// sessionInfo is what the Manager remembers beyond Mutagen's state.
type sessionInfo struct {
	cycles     uint64
	lastSync   time.Time
	lastFlush  time.Time
	connected  bool // both endpoints, as last observed
	refilling  bool
	freshGuest bool // the guest reported a new copy; history must go
	refills    int
	lastRefill time.Time
	refillErr  string
}

// NewManager opens the Mutagen data directory, loads the sessions saved
// there and starts them; they connect to the guest through opts.Dial at once
// (and retry every 15 s), so create the Manager once the guest agent is
// reachable.
func NewManager(opts Options) (*Manager, error) {
	if opts.Dial == nil {
		return nil, errors.New("sync manager: Options.Dial is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	release, err := acquireDataDir(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("sync manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		log:      log,
		dial:     opts.Dial,
		watch:    watchPlan{pollSeconds: pollSeconds(opts.PollInterval), hostWatched: opts.HostWatched, guestWatched: opts.GuestWatched},
		backstop: make(chan time.Duration, 1),
		release:  release,
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		info:     make(map[string]*sessionInfo),
	}
	// The handler must find us before Mutagen loads and starts sessions.
	if err := setOpenManager(m); err != nil {
		cancel()
		release()
		return nil, fmt.Errorf("sync manager: %w", err)
	}
	mgr, err := synchronization.NewManager(newMutagenLogger(log.With("side", "host")))
	if err != nil {
		cancel()
		_ = setOpenManager(nil)
		release()
		return nil, fmt.Errorf("sync manager: %w", err)
	}
	m.mgr = mgr
	go m.monitor(ctx)
	if m.watch.hostWatched || m.watch.guestWatched {
		every := opts.Backstop
		if every <= 0 {
			every = DefaultBackstop
		}
		m.workers.Add(1)
		go m.runBackstop(ctx, every)
	}
	return m, nil
}

// SetBackstop changes the period of the full rescan behind the caller's
// watchers, for example to DefaultPollInterval when a watcher failed and
// the rescan is all that finds changes. It has no effect on a Manager
// without HostWatched or GuestWatched (Mutagen polls those itself).
func (m *Manager) SetBackstop(every time.Duration) {
	if every <= 0 {
		every = DefaultBackstop
	}
	select {
	case <-m.backstop:
	default:
	}
	m.backstop <- every
}

// backstopShare bounds the backstop's cost: the wait after a rescan is at
// least this many times as long as the rescan took. A 20,000-file tree
// took the guest about 1.3 s of an emulated CPU per rescan, 13% of it idle
// at one rescan per 10 s; the wait grows with the tree instead.
const backstopShare = 20

// backstopWait is how long the backstop waits after a rescan that took
// took: the configured period, or longer for a costly rescan.
func backstopWait(every, took time.Duration) time.Duration {
	return max(every, backstopShare*took)
}

// runBackstop flushes every session that ran no cycle for a period and
// waits for the cycle; a flush forces a full scan of both sides. A session
// that synced within the period was scanned whole by that cycle, so a
// rescan now would only take CPU from the work that changes the tree.
func (m *Manager) runBackstop(ctx context.Context, every time.Duration) {
	defer m.workers.Done()
	wait := every
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case every = <-m.backstop:
			wait = every
			t.Reset(wait)
			continue
		case <-t.C:
		}
		var took time.Duration
		if states, err := m.list(); err == nil {
			for _, st := range states {
				if _, ok := mountIDFromName(st.Session.Name); ok && !st.Session.Paused && st.Status >= synchronization.Status_Watching &&
					!m.syncedWithin(st.Session.Identifier, every) {
					start := time.Now()
					fctx, cancel := context.WithTimeout(ctx, max(every, time.Minute))
					_ = m.mgr.Flush(fctx, bySession(st.Session.Identifier), "", false)
					cancel()
					took += time.Since(start)
				}
			}
		}
		wait = backstopWait(every, took)
		t.Reset(wait)
	}
}

// syncedWithin reports whether session sid completed a cycle in the last d.
func (m *Manager) syncedWithin(sid string, d time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	last := m.infoLocked(sid).lastSync
	return !last.IsZero() && time.Since(last) < d
}

func pollSeconds(d time.Duration) uint32 {
	if d <= 0 {
		d = DefaultPollInterval
	}
	return uint32((d + time.Second - 1) / time.Second)
}

// Close stops all sessions (they stay saved and resume with the next
// Manager) and releases the process-wide Mutagen settings.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.workers.Wait()
	m.mgr.Shutdown()
	<-m.done
	_ = setOpenManager(nil)
	m.release()
	return nil
}

func (m *Manager) checkOpen() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// Ensure makes sure the session of mount exists and runs. A saved session
// with the same settings is resumed, one with other settings (paths,
// ignores, owner, modes) is replaced: the new one starts without history,
// which in two-way-safe mode only adds files and reports differing ones as
// conflicts. Ensure does not wait for the first sync (see WaitInitial); an
// error about connecting means the session exists and keeps retrying.
func (m *Manager) Ensure(ctx context.Context, mount Mount) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	if err := mount.validate(); err != nil {
		return err
	}
	common, host, guest := mount.configurations(m.watch)
	if err := validateConfig(common, host, guest); err != nil {
		return fmt.Errorf("sync mount %s: %w", mount.ID, err)
	}
	fp := mount.fingerprint(m.watch)
	st, err := m.find(mount.ID)
	if err != nil && !errors.Is(err, errUnknownMount) {
		return err
	}
	if st != nil && st.Session.Labels[labelConfig] != fp {
		m.log.Info("sync mount settings changed, re-creating its session", "mount", mount.ID)
		if err := m.terminate(ctx, st.Session.Identifier); err != nil {
			return fmt.Errorf("sync mount %s: %w", mount.ID, err)
		}
		st = nil
	}
	if st == nil {
		return m.create(ctx, mount, common, host, guest, fp)
	}
	return m.resume(ctx, mount.ID, st.Session.Identifier)
}

// create saves a paused session, then resumes it: resuming keeps the
// session even when the guest is not reachable yet (it retries).
func (m *Manager) create(ctx context.Context, mount Mount, common, host, guest *synchronization.Configuration, fp string) error {
	labels := map[string]string{labelConfig: fp}
	sid, err := m.mgr.Create(ctx, mount.alphaURL(), mount.betaURL(),
		common, host, guest,
		sessionName(mount.ID), labels, true, "")
	if err != nil {
		return fmt.Errorf("create sync session for %s: %w", mount.ID, err)
	}
	m.log.Info("sync session created", "mount", mount.ID, "session", sid)
	return m.resume(ctx, mount.ID, sid)
}

func (m *Manager) resume(ctx context.Context, id, sid string) error {
	err := m.mgr.Resume(ctx, bySession(sid), "")
	if errors.Is(err, errFreshGuest) {
		return nil // the monitor resets the session; WaitInitial covers it
	}
	if err != nil {
		return fmt.Errorf("resume sync mount %s: %w", id, err)
	}
	return nil
}

func (m *Manager) terminate(ctx context.Context, sid string) error {
	if err := m.mgr.Terminate(ctx, bySession(sid), ""); err != nil {
		return fmt.Errorf("terminate sync session %s: %w", sid, err)
	}
	m.mu.Lock()
	delete(m.info, sid)
	m.mu.Unlock()
	return nil
}

// Terminate removes the session of mount id and its sync history. Neither
// the host folder nor the guest copy is touched.
func (m *Manager) Terminate(ctx context.Context, id string) error {
	sid, err := m.sessionID(id)
	if err != nil {
		return err
	}
	return m.terminate(ctx, sid)
}

// Prune terminates the sessions of mounts that are not in keep, for example
// mounts removed from the configuration.
func (m *Manager) Prune(ctx context.Context, keep []string) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	states, err := m.list()
	if err != nil {
		return err
	}
	wanted := make(map[string]bool, len(keep))
	for _, id := range keep {
		wanted[id] = true
	}
	var errs []error
	for _, st := range states {
		if id, ok := mountIDFromName(st.Session.Name); ok && !wanted[id] {
			m.log.Info("removing sync session of a dropped mount", "mount", id)
			errs = append(errs, m.terminate(ctx, st.Session.Identifier))
		}
	}
	return errors.Join(errs...)
}

// Reset forgets the sync history of mount id and restarts it. Without
// history, two-way-safe only creates files: each side receives what it
// lacks, differing files become conflicts, nothing is deleted. Use it when
// the guest copy was created from scratch, or to refill an emptied side.
func (m *Manager) Reset(ctx context.Context, id string) error {
	sid, err := m.sessionID(id)
	if err != nil {
		return err
	}
	return m.resetSession(ctx, id, sid)
}

func (m *Manager) resetSession(ctx context.Context, id, sid string) error {
	if err := m.mgr.Reset(ctx, bySession(sid), ""); err != nil {
		return fmt.Errorf("reset sync mount %s: %w", id, err)
	}
	return nil
}

// PauseAll stops all sessions and closes their streams; they stay paused
// across restarts until resumed (Ensure also resumes).
func (m *Manager) PauseAll(ctx context.Context) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	if err := m.mgr.Pause(ctx, &selection.Selection{All: true}, ""); err != nil {
		return fmt.Errorf("pause sync sessions: %w", err)
	}
	return nil
}

// ResumeAll (re)connects all sessions now. An error means some session could
// not connect; it keeps retrying on its own every 15 s.
func (m *Manager) ResumeAll(ctx context.Context) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	if err := m.mgr.Resume(ctx, &selection.Selection{All: true}, ""); err != nil {
		return fmt.Errorf("resume sync sessions: %w", err)
	}
	return nil
}

// Reconnect is for a new agent connection: the old streams are dead, and
// Mutagen would otherwise wait up to 15 s before it reconnects.
func (m *Manager) Reconnect(ctx context.Context) error {
	if err := m.PauseAll(ctx); err != nil {
		return err
	}
	return m.ResumeAll(ctx)
}

func bySession(sid string) *selection.Selection {
	return &selection.Selection{Specifications: []string{sid}}
}

// list returns a snapshot of all sessions without waiting.
func (m *Manager) list() ([]*synchronization.State, error) {
	_, states, err := m.mgr.List(context.Background(), &selection.Selection{All: true}, 0)
	if err != nil {
		return nil, fmt.Errorf("list sync sessions: %w", err)
	}
	return states, nil
}

// find returns the state of mount id's session.
func (m *Manager) find(id string) (*synchronization.State, error) {
	states, err := m.list()
	if err != nil {
		return nil, err
	}
	for _, st := range states {
		if st.Session.Name == sessionName(id) {
			return st, nil
		}
	}
	return nil, fmt.Errorf("sync mount %s: %w", id, errUnknownMount)
}

func (m *Manager) sessionID(id string) (string, error) {
	if err := m.checkOpen(); err != nil {
		return "", err
	}
	st, err := m.find(id)
	if err != nil {
		return "", err
	}
	return st.Session.Identifier, nil
}
