// Package idle pauses a VM that nobody uses and wakes it on the next use.
// The host agent counts what uses the VM through Hold (each
// docker or containerd API connection, forwarded connection, `vmdock
// ssh`/`exec`/`nerdctl` session and guest-bound control request) and asks
// the guest whether containers run; after a quiet period the Monitor has
// the guest give back what it can, then pauses the VM. The first Hold
// after that wakes it before it returns, so the caller never sees the
// pause.
package idle

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Config is what a Monitor does at each turn; the host agent supplies the
// guest and VM side, tests fake them.
type Config struct {
	// After is how long the VM must be unused before it pauses; 0 never.
	After time.Duration
	// Busy asks the guest whether it has work of its own (running
	// containers); an error counts as busy.
	Busy func(ctx context.Context) (bool, error)
	// Prepare readies the guest for the pause (memory and disk back to the
	// host). Its ctx ends when a use arrives meanwhile: the pause is off.
	Prepare func(ctx context.Context) error
	// Pause freezes the VM; Wake lets it run again, clock set.
	Pause func(ctx context.Context) error
	Wake  func(ctx context.Context) error
	// Paused asks the VMM whether the VM is paused, to learn the truth
	// after a Pause or Wake that failed part way (a lost reply); nil
	// trusts the error.
	Paused func(ctx context.Context) (bool, error)
	// Now is the clock; time.Now when nil. Its monotonic reading
	// (CLOCK_MONOTONIC on Linux) stops while the host sleeps, so time
	// asleep counts as neither use nor idleness.
	Now func() time.Time
	Log *slog.Logger
}

// State is the Monitor as `vmdock status` shows it.
type State struct {
	After       time.Duration
	Paused      bool
	PausedSince time.Time // zero while running
	Pauses      int       // since the host agent started
	// LastWake is how long the last wake took (unpause, clock, session).
	LastWake time.Duration
	// Users are the uses open now (connections, sessions).
	Users int
}

// Monitor decides when the VM pauses and wakes it for every use. A nil
// *Monitor never pauses: Hold and Wake do nothing.
type Monitor struct {
	cfg Config

	mu          sync.Mutex
	after       time.Duration
	users       int
	lastUse     time.Time // host side: the last Hold began or ended
	busySeen    time.Time // guest side: containers last seen running
	busyChecked time.Time
	pausing     bool // a pause is being prepared or made
	paused      bool
	pausedSince time.Time
	pauses      int
	lastWake    time.Duration
	closed      bool
	cancelPrep  context.CancelFunc
	kick        chan struct{}

	// opMu makes pause and wake one at a time: a use that arrives during
	// a pause waits for it to finish, then wakes the VM.
	opMu sync.Mutex
}

// New returns a Monitor for a VM that has just become ready.
func New(cfg Config) *Monitor {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	now := cfg.Now()
	return &Monitor{cfg: cfg, after: cfg.After, lastUse: now, busySeen: now, kick: make(chan struct{}, 1)}
}

// tick is how often the monitor looks at the use counts: a tenth of the
// idle period, between 200 ms and 5 s.
func tick(after time.Duration) time.Duration {
	return min(max(after/10, 200*time.Millisecond), 5*time.Second)
}

// busyPoll is how often the guest is asked about containers once the host
// side is quiet: a quarter of the idle period, at most a minute, so a
// container that ends is noticed well within the period.
func busyPoll(after time.Duration) time.Duration {
	return min(max(after/4, tick(after)), time.Minute)
}

// SetAfter changes the idle period of the running VM (0: never pause).
// The quiet period counts from now.
func (m *Monitor) SetAfter(d time.Duration) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.after = d
	m.lastUse = m.cfg.Now()
	m.busyChecked = time.Time{}
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Hold marks a use of the VM until release is called, waking the VM first
// when it is paused. An error means the VM could not be woken.
func (m *Monitor) Hold(ctx context.Context) (release func(), err error) {
	if m == nil {
		return func() {}, nil
	}
	m.mu.Lock()
	m.users++
	m.lastUse = m.cfg.Now()
	if m.cancelPrep != nil {
		m.cancelPrep()
	}
	m.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			m.mu.Lock()
			m.users--
			m.lastUse = m.cfg.Now()
			m.mu.Unlock()
		})
	}
	if err := m.ensureAwake(ctx); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// Wake lets a paused VM run again without holding it: what follows (a
// stop) needs the guest once.
func (m *Monitor) Wake(ctx context.Context) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	m.lastUse = m.cfg.Now()
	m.mu.Unlock()
	return m.ensureAwake(ctx)
}

// Close ends the pausing for good (the instance stops) and wakes a paused
// VM, so the stop can talk to its guest.
func (m *Monitor) Close(ctx context.Context) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	m.closed = true
	if m.cancelPrep != nil {
		m.cancelPrep()
	}
	m.mu.Unlock()
	return m.ensureAwake(ctx)
}

func (m *Monitor) ensureAwake(ctx context.Context) error {
	m.mu.Lock()
	quiet := !m.paused && !m.pausing
	m.mu.Unlock()
	if quiet {
		return nil
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	paused := m.paused
	m.mu.Unlock()
	if !paused {
		return nil
	}
	start := m.cfg.Now()
	if err := m.cfg.Wake(ctx); err != nil {
		if !m.vmmPaused(ctx, true) {
			// The VM runs (the answer to the unpause was lost): the next
			// use must not try to wake it again.
			m.mu.Lock()
			m.paused, m.pausedSince = false, time.Time{}
			m.mu.Unlock()
		}
		return err
	}
	woke := m.cfg.Now()
	m.mu.Lock()
	m.paused, m.pausedSince = false, time.Time{}
	m.lastWake = woke.Sub(start)
	m.lastUse, m.busySeen = woke, woke
	m.mu.Unlock()
	m.cfg.Log.Info("woke the VM paused while idle", "took", woke.Sub(start).Round(time.Millisecond))
	return nil
}

// Paused says whether the VM is paused (or being paused) now.
func (m *Monitor) Paused() bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused
}

// State reports the monitor for status.
func (m *Monitor) State() State {
	if m == nil {
		return State{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return State{After: m.after, Paused: m.paused, PausedSince: m.pausedSince, Pauses: m.pauses, LastWake: m.lastWake, Users: m.users}
}

// Run pauses the VM whenever it has been unused for the idle period, until
// ctx ends or Close.
func (m *Monitor) Run(ctx context.Context) {
	if m == nil {
		return
	}
	for {
		m.mu.Lock()
		wait := tick(m.after)
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-time.After(wait):
		}
		if m.isClosed() {
			return
		}
		m.maybePause(ctx)
	}
}

func (m *Monitor) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// idleSince returns the last use when the VM is unused for the idle
// period now (host side; the guest is asked separately), else false.
func (m *Monitor) idleSince() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	if m.closed || m.paused || m.pausing || m.after <= 0 || m.users > 0 || now.Sub(m.lastUse) < m.after {
		return time.Time{}, false
	}
	return m.lastUse, true
}

// usedSince says a use began or ended after mark, or one is open.
func (m *Monitor) usedSince(mark time.Time) bool {
	return m.users > 0 || !m.lastUse.Equal(mark) || m.closed
}

func (m *Monitor) maybePause(ctx context.Context) {
	mark, idle := m.idleSince()
	if !idle || !m.guestIdle(ctx) {
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.mu.Lock()
	if m.usedSince(mark) {
		m.mu.Unlock()
		return
	}
	m.pausing, m.cancelPrep = true, cancel
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.pausing, m.cancelPrep = false, nil
		m.mu.Unlock()
	}()
	if err := m.cfg.Prepare(pctx); err != nil {
		if pctx.Err() == nil {
			m.cfg.Log.Warn("idle pause: preparing the guest failed; it stays running", "err", err)
		}
		return
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	used := m.usedSince(mark)
	m.mu.Unlock()
	if used {
		return
	}
	m.pauseNow(ctx)
}

// pauseTimeout bounds a pause once decided; a use that arrives meanwhile
// does not cut it short.
const pauseTimeout = 30 * time.Second

// pauseNow pauses the VM; opMu is held. Once sent, the VMM pauses whether
// or not its answer is read, so the pause runs to the end and a use that
// arrives meanwhile waits on opMu and wakes the VM after. A failure is
// checked against the VMM's own state.
func (m *Monitor) pauseNow(ctx context.Context) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseTimeout)
	defer cancel()
	if err := m.cfg.Pause(pctx); err != nil {
		if !m.vmmPaused(pctx, false) {
			m.cfg.Log.Warn("idle pause failed; the VM stays running", "err", err)
			return
		}
		m.cfg.Log.Warn("idle pause reported a failure, but the VM is paused", "err", err)
	}
	m.mu.Lock()
	m.paused, m.pausedSince = true, m.cfg.Now()
	m.pauses++
	after := m.after
	m.mu.Unlock()
	m.cfg.Log.Info("paused the VM while idle", "unusedFor", after)
}

// vmmPaused asks the VMM whether the VM is paused after a Pause or Wake
// failed; without an answer it returns guess, what the failure implies.
func (m *Monitor) vmmPaused(ctx context.Context, guess bool) bool {
	if m.cfg.Paused == nil {
		return guess
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	paused, err := m.cfg.Paused(qctx)
	if err != nil {
		m.cfg.Log.Warn("idle pause: the VMM did not say whether the VM is paused", "err", err)
		return guess
	}
	return paused
}

// guestIdle asks the guest, at most every busyPoll, whether containers
// run, and says whether none has run for the idle period.
func (m *Monitor) guestIdle(ctx context.Context) bool {
	m.mu.Lock()
	now, after := m.cfg.Now(), m.after
	ask := now.Sub(m.busyChecked) >= busyPoll(after)
	m.mu.Unlock()
	if ask {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		busy, err := m.cfg.Busy(cctx)
		cancel()
		if err != nil {
			m.cfg.Log.Debug("idle pause: the guest did not say whether it is busy", "err", err)
		}
		m.mu.Lock()
		m.busyChecked = m.cfg.Now()
		if busy || err != nil {
			m.busySeen = m.busyChecked
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.Now().Sub(m.busySeen) >= m.after
}
