package syncmount

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mutagen-io/mutagen/pkg/selection"
	"github.com/mutagen-io/mutagen/pkg/synchronization"
	"github.com/mutagen-io/mutagen/pkg/synchronization/core"
)

// SessionStatus is the state of one sync mount, for `status` and
// `vmdock sync status`.
type SessionStatus struct {
	ID        string `json:"id"`
	Session   string `json:"session"`
	HostPath  string `json:"hostPath"`
	GuestPath string `json:"guestPath"`
	// State is Mutagen's status in words, with alpha/beta named host/guest:
	// "paused", "connecting-guest", "watching", "scanning", "staging-guest",
	// "halted-on-root-emptied", ...
	State     string `json:"state"`
	Paused    bool   `json:"paused"`
	Connected bool   `json:"connected"`
	LastError string `json:"lastError,omitempty"`
	// SuccessfulCycles counts completed sync cycles since the session (re)started.
	SuccessfulCycles uint64    `json:"successfulCycles"`
	LastSync         time.Time `json:"lastSync,omitzero"`
	LastFlush        time.Time `json:"lastFlush,omitzero"`
	HostFiles        uint64    `json:"hostFiles"`
	HostBytes        uint64    `json:"hostBytes"`
	GuestFiles       uint64    `json:"guestFiles"`
	GuestBytes       uint64    `json:"guestBytes"`
	// Conflicts lists at most 10 conflicts (Mutagen's cap), sorted by path;
	// MoreConflicts counts the rest.
	Conflicts     []Conflict `json:"conflicts,omitempty"`
	MoreConflicts uint64     `json:"moreConflicts,omitempty"`
	Problems      []Problem  `json:"problems,omitempty"`
	// Refills counts how often an emptied or missing guest copy was refilled
	// from the host since the Manager started.
	Refills int `json:"refills,omitempty"`
}

// Conflict is a path changed on both sides since the last sync. Both
// contents are kept: the host has its version, the guest copy has its own,
// until one side is changed to match the other.
type Conflict struct {
	Path  string `json:"path"`
	Host  string `json:"host"`  // what the host did: created, modified, deleted
	Guest string `json:"guest"` // what the guest did
}

// Problem is a path that could not be scanned or written on one side.
type Problem struct {
	Side  string `json:"side"` // host or guest
	Path  string `json:"path"`
	Error string `json:"error"`
}

// Progress reports the first sync of the mounts WaitInitial waits for.
type Progress struct {
	Mounts int // sync mounts waited for
	Done   int // of those, how many finished their first sync
	// Files and Bytes received so far by the current staging runs, out of
	// ExpectedFiles; all sides and mounts summed.
	Files, Bytes, ExpectedFiles uint64
}

// Status returns the state of every sync mount, sorted by creation time.
func (m *Manager) Status() ([]SessionStatus, error) {
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	states, err := m.list()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SessionStatus
	for _, st := range states {
		id, ok := mountIDFromName(st.Session.Name)
		if !ok {
			continue
		}
		out = append(out, m.statusLocked(id, st))
	}
	return out, nil
}

func (m *Manager) statusLocked(id string, st *synchronization.State) SessionStatus {
	info := m.infoLocked(st.Session.Identifier)
	s := SessionStatus{
		ID:               id,
		Session:          st.Session.Identifier,
		HostPath:         st.Session.Alpha.Path,
		GuestPath:        st.Session.Beta.Path,
		State:            stateName(st),
		Paused:           st.Session.Paused,
		Connected:        st.AlphaState.GetConnected() && st.BetaState.GetConnected(),
		LastError:        st.LastError,
		SuccessfulCycles: st.SuccessfulCycles,
		LastSync:         info.lastSync,
		LastFlush:        info.lastFlush,
		HostFiles:        st.AlphaState.GetFiles(),
		HostBytes:        st.AlphaState.GetTotalFileSize(),
		GuestFiles:       st.BetaState.GetFiles(),
		GuestBytes:       st.BetaState.GetTotalFileSize(),
		MoreConflicts:    st.ExcludedConflicts,
		Refills:          info.refills,
	}
	if s.LastError == "" {
		s.LastError = info.refillErr
	}
	for _, c := range st.Conflicts {
		s.Conflicts = append(s.Conflicts, Conflict{Path: c.Root, Host: describe(c.AlphaChanges), Guest: describe(c.BetaChanges)})
	}
	s.Problems = append(problems("host", st.AlphaState), problems("guest", st.BetaState)...)
	return s
}

func stateName(st *synchronization.State) string {
	if st.Session.Paused {
		return "paused"
	}
	text, _ := st.Status.MarshalText()
	name := strings.ReplaceAll(string(text), "alpha", "host")
	return strings.ReplaceAll(name, "beta", "guest")
}

// describe names the change of one side at a conflict's root.
func describe(changes []*core.Change) string {
	if len(changes) == 0 {
		return "unchanged"
	}
	c := changes[0]
	switch {
	case c.Old == nil:
		return "created"
	case c.New == nil:
		return "deleted"
	default:
		return "modified"
	}
}

func problems(side string, es *synchronization.EndpointState) []Problem {
	var out []Problem
	for _, p := range append(es.GetScanProblems(), es.GetTransitionProblems()...) {
		out = append(out, Problem{Side: side, Path: p.Path, Error: p.Error})
	}
	return out
}

// Flush runs a full sync cycle of mount id now and waits for it; the guest
// agent's change events and `stop` use it. While the session is still
// connecting, Flush waits for it, so bound ctx.
func (m *Manager) Flush(ctx context.Context, id string) error {
	sid, err := m.sessionID(id)
	if err != nil {
		return err
	}
	return m.flushSession(ctx, id, sid)
}

// FlushAll flushes every sync mount, for example before the guest stops.
func (m *Manager) FlushAll(ctx context.Context) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	states, err := m.list()
	if err != nil {
		return err
	}
	var errs []error
	for _, st := range states {
		if id, ok := mountIDFromName(st.Session.Name); ok {
			errs = append(errs, m.flushSession(ctx, id, st.Session.Identifier))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) flushSession(ctx context.Context, id, sid string) error {
	for {
		err := m.mgr.Flush(ctx, bySession(sid), "", false)
		if err == nil {
			m.mu.Lock()
			m.infoLocked(sid).lastFlush = time.Now()
			m.mu.Unlock()
			return nil
		}
		if !m.flushMayRetry(sid) || !sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("flush sync mount %s: %w", id, err)
		}
	}
}

// flushMayRetry tells a session that is still connecting (or being refilled)
// from one that cannot sync until someone acts (paused, halted, gone).
func (m *Manager) flushMayRetry(sid string) bool {
	if m.checkOpen() != nil {
		return false
	}
	_, states, err := m.mgr.List(context.Background(), bySession(sid), 0)
	if err != nil || len(states) != 1 {
		return false
	}
	return m.stuck(states[0]) == nil
}

// stuck says why a session cannot sync until someone acts: paused, or
// halted for a reason the Manager does not fix. A refill in progress pauses
// and halts sessions only briefly, so it does not count.
func (m *Manager) stuck(st *synchronization.State) error {
	m.mu.Lock()
	info := m.info[st.Session.Identifier]
	refilling := info != nil && (info.refilling || info.freshGuest)
	m.mu.Unlock()
	switch {
	case refilling || guestCopyLost(st):
		return nil
	case st.Session.Paused:
		return errors.New("paused")
	case halted(st.Status):
		return fmt.Errorf("halted: %s", st.Status.Description())
	}
	return nil
}

func halted(s synchronization.Status) bool {
	return s == synchronization.Status_HaltedOnRootEmptied ||
		s == synchronization.Status_HaltedOnRootDeletion ||
		s == synchronization.Status_HaltedOnRootTypeChange
}

// WaitInitial waits until every sync mount finished one full sync cycle
// since it (re)started, calling progress (if not nil) on every change. It
// fails at once for a paused mount or one halted for a reason the Manager
// does not fix itself (the host folder was emptied or replaced).
func (m *Manager) WaitInitial(ctx context.Context, progress func(Progress)) error {
	if err := m.checkOpen(); err != nil {
		return err
	}
	var index uint64
	for {
		next, states, err := m.mgr.List(ctx, &selection.Selection{All: true}, index)
		if err != nil {
			return fmt.Errorf("wait for initial sync: %w", err)
		}
		index = next
		p, err := m.initialProgress(states)
		if err != nil {
			return err
		}
		if progress != nil {
			progress(p)
		}
		if p.Done == p.Mounts {
			return nil
		}
	}
}

func (m *Manager) initialProgress(states []*synchronization.State) (Progress, error) {
	var p Progress
	for _, st := range states {
		id, ok := mountIDFromName(st.Session.Name)
		if !ok {
			continue
		}
		p.Mounts++
		if err := m.stuck(st); err != nil {
			return p, fmt.Errorf("sync mount %s: %w", id, err)
		}
		if st.SuccessfulCycles > 0 {
			p.Done++
		}
		for _, sp := range []*synchronization.EndpointState{st.AlphaState, st.BetaState} {
			if r := sp.GetStagingProgress(); r != nil {
				p.Files += r.ReceivedFiles
				p.Bytes += r.TotalReceivedSize
				p.ExpectedFiles += r.ExpectedFiles
			}
		}
	}
	return p, nil
}
