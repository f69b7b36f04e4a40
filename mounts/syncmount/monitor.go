package syncmount

import (
	"context"
	"errors"
	"time"

	"github.com/mutagen-io/mutagen/pkg/selection"
	"github.com/mutagen-io/mutagen/pkg/state"
	"github.com/mutagen-io/mutagen/pkg/synchronization"
)

// monitor follows Mutagen's state changes: it records sync times and
// refills a guest copy that went empty or missing.
func (m *Manager) monitor(ctx context.Context) {
	defer close(m.done)
	var index uint64
	for {
		next, states, err := m.mgr.List(ctx, &selection.Selection{All: true}, index)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, state.ErrTrackingTerminated) {
				return
			}
			m.log.Warn("sync state tracking failed", "err", err)
			if !sleep(ctx, time.Second) {
				return
			}
			index = 0
			continue
		}
		index = next
		m.observe(ctx, states)
	}
}

func (m *Manager) observe(ctx context.Context, states []*synchronization.State) {
	// Flushed after the lock is released: a flush waits for the session's
	// lifecycle lock, which a connecting session holds while our protocol
	// handler takes m.mu (freshGuest).
	var flush []string
	defer func() {
		for _, sid := range flush {
			go m.flushWhenReady(ctx, sid) // counted in workers under m.mu
		}
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, st := range states {
		id, ok := mountIDFromName(st.Session.Name)
		if !ok {
			continue
		}
		info := m.infoLocked(st.Session.Identifier)
		if st.SuccessfulCycles != info.cycles && st.SuccessfulCycles > 0 {
			info.lastSync = time.Now()
		}
		info.cycles = st.SuccessfulCycles
		connected := st.AlphaState != nil && st.AlphaState.Connected && st.BetaState != nil && st.BetaState.Connected
		if connected && !info.connected && m.watch.manual() && !m.closed {
			// With both sides watched by us Mutagen runs no cycle on
			// connect, so what changed while the link was down would
			// wait for the next watcher report or the backstop.
			m.workers.Add(1)
			flush = append(flush, st.Session.Identifier)
		}
		info.connected = connected
		if (guestCopyLost(st) || info.freshGuest) && !info.refilling && !m.closed {
			info.refilling = true
			info.freshGuest = false
			m.workers.Add(1)
			go m.refillGuest(ctx, id, st.Session.Identifier)
		}
	}
}

// flushWhenReady asks for a cycle as soon as the session takes one: a
// session reports its endpoints connected a moment before its sync loop
// runs, and a flush in between is refused ("not currently able to
// synchronize").
func (m *Manager) flushWhenReady(ctx context.Context, sid string) {
	defer m.workers.Done()
	for range 50 {
		if m.mgr.Flush(ctx, bySession(sid), "", true) == nil {
			return
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return
		}
	}
}

func (m *Manager) infoLocked(sid string) *sessionInfo {
	info := m.info[sid]
	if info == nil {
		info = &sessionInfo{}
		m.info[sid] = info
	}
	return info
}

// guestCopyLost reports a safety halt caused by the guest copy going empty or
// missing while the host folder still has content. Mutagen halted instead
// of deleting the host files; the history must go so the host refills the
// guest. The reverse (host emptied) is left halted: the guest copy is then
// the only full copy and the user decides.
func guestCopyLost(st *synchronization.State) bool {
	if st.Status != synchronization.Status_HaltedOnRootEmptied &&
		st.Status != synchronization.Status_HaltedOnRootDeletion {
		return false
	}
	host, guest := st.AlphaState, st.BetaState
	if host == nil || guest == nil || !host.Scanned || !guest.Scanned {
		return false
	}
	guestEmpty := guest.Files == 0 && guest.SymbolicLinks == 0 && guest.Directories <= 1
	hostHasContent := host.Files+host.SymbolicLinks > 0 || host.Directories > 1
	return guestEmpty && hostHasContent
}

// freshGuest is called by the protocol handler when the guest has never
// served session although the host has history for it. The connection
// attempt fails; the monitor sees that state change and resets the session.
func (m *Manager) freshGuest(sid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.infoLocked(sid).freshGuest = true
}

func (m *Manager) refillGuest(ctx context.Context, id, sid string) {
	defer m.workers.Done()
	// A refill that keeps failing must not spin against the guest.
	m.mu.Lock()
	wait := time.Until(m.infoLocked(sid).lastRefill.Add(refillBackoff))
	m.mu.Unlock()
	if wait > 0 && !sleep(ctx, wait) {
		return
	}
	m.log.Warn("guest copy of a sync mount is new, empty or missing; refilling it from the host", "mount", id)
	err := m.resetSession(ctx, id, sid)
	m.mu.Lock()
	defer m.mu.Unlock()
	info := m.infoLocked(sid)
	info.refilling = false
	info.lastRefill = time.Now()
	info.refills++
	info.refillErr = ""
	if err != nil {
		info.refillErr = err.Error()
		m.log.Error("refilling the guest copy failed", "mount", id, "err", err)
	}
}

const refillBackoff = 5 * time.Second

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
