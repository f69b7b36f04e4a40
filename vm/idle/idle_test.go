package idle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeVM records what the monitor did to it; its clock moves only when
// the test says.
type fakeVM struct {
	mu      sync.Mutex
	now     time.Time
	busy    bool
	busyErr error
	calls   []string
	paused  bool
	wakeErr error
	prepare func(ctx context.Context) error
	// pauseHook runs inside Pause; like QMP stop, the VM ends paused even
	// when the hook fails (the command was sent, its reply was lost).
	pauseHook func(ctx context.Context) error
	statusErr error
}

func newFakeVM() *fakeVM { return &fakeVM{now: time.Unix(1_700_000_000, 0)} }

func (f *fakeVM) record(c string) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

func (f *fakeVM) ran() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, " ")
}

func (f *fakeVM) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fakeVM) config(after time.Duration) Config {
	return Config{
		After: after,
		Now: func() time.Time {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.now
		},
		Busy: func(context.Context) (bool, error) {
			f.record("busy?")
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.busy, f.busyErr
		},
		Prepare: func(ctx context.Context) error {
			f.record("prepare")
			if f.prepare != nil {
				return f.prepare(ctx)
			}
			return nil
		},
		Pause: func(ctx context.Context) error {
			var err error
			if f.pauseHook != nil {
				err = f.pauseHook(ctx)
			}
			f.record("pause")
			f.mu.Lock()
			f.paused = true
			f.mu.Unlock()
			return err
		},
		Paused: func(context.Context) (bool, error) {
			f.record("status?")
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.paused, f.statusErr
		},
		Wake: func(context.Context) error {
			f.record("wake")
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.wakeErr != nil {
				return f.wakeErr
			}
			f.paused = false
			return nil
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// The VM pauses once it was unused for the period and the guest runs no
// container; the next use wakes it before Hold returns, once.
func TestPausesWhenUnusedAndWakesOnUse(t *testing.T) {
	f := newFakeVM()
	m := New(f.config(10 * time.Second))
	ctx := context.Background()
	f.advance(9 * time.Second)
	m.maybePause(ctx)
	if got := f.ran(); got != "" {
		t.Fatalf("acted before the period: %q", got)
	}
	f.advance(2 * time.Second)
	m.maybePause(ctx)
	if got := f.ran(); got != "busy? prepare pause" || !m.State().Paused {
		t.Fatalf("after the period: %q, paused %v", got, m.State().Paused)
	}
	release, err := m.Hold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := m.State(); st.Paused || st.Pauses != 1 || st.Users != 1 || f.paused {
		t.Fatalf("after a use: %+v (vm paused %v)", st, f.paused)
	}
	release2, _ := m.Hold(ctx)
	release()
	release()
	release2()
	if got := f.ran(); got != "busy? prepare pause wake" {
		t.Fatalf("a second use woke again: %q", got)
	}
	if m.State().Users != 0 {
		t.Fatalf("users after release: %d", m.State().Users)
	}
	// An open use keeps it running however long it lasts.
	release, _ = m.Hold(ctx)
	f.advance(time.Hour)
	m.maybePause(ctx)
	release()
	if got := f.ran(); got != "busy? prepare pause wake" {
		t.Fatalf("paused under an open use: %q", got)
	}
}

// Running containers keep the VM up; it pauses a full period after the
// last one was seen.
func TestRunningContainersKeepItUp(t *testing.T) {
	f := newFakeVM()
	f.busy = true
	m := New(f.config(10 * time.Second))
	ctx := context.Background()
	f.advance(11 * time.Second)
	m.maybePause(ctx)
	f.advance(3 * time.Second)
	m.maybePause(ctx)
	if got := f.ran(); got != "busy? busy?" {
		t.Fatalf("busy guest: %q", got)
	}
	f.busy = false
	f.advance(3 * time.Second)
	m.maybePause(ctx) // the container is gone; the period starts at its last sighting
	f.advance(6 * time.Second)
	m.maybePause(ctx)
	if m.State().Paused {
		t.Fatal("paused before a period without containers")
	}
	f.advance(5 * time.Second)
	m.maybePause(ctx)
	if !m.State().Paused {
		t.Fatalf("not paused a period after the last container: %q", f.ran())
	}
	// A guest that does not answer is taken as busy.
	f2 := newFakeVM()
	f2.busyErr = errors.New("agent not connected")
	m2 := New(f2.config(10 * time.Second))
	f2.advance(time.Minute)
	m2.maybePause(ctx)
	if m2.State().Paused {
		t.Fatal("paused a guest that did not say it was idle")
	}
}

// A use that arrives while the guest is being prepared calls the pause
// off; the VM never stops.
func TestUseDuringPrepareCallsThePauseOff(t *testing.T) {
	f := newFakeVM()
	m := New(f.config(10 * time.Second))
	inPrepare := make(chan struct{})
	f.prepare = func(ctx context.Context) error {
		close(inPrepare)
		<-ctx.Done()
		return ctx.Err()
	}
	f.advance(11 * time.Second)
	done := make(chan struct{})
	go func() { m.maybePause(context.Background()); close(done) }()
	<-inPrepare
	release, err := m.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	<-done
	release()
	if got := f.ran(); got != "busy? prepare" || m.State().Paused {
		t.Fatalf("use during prepare: %q, paused %v", got, m.State().Paused)
	}
}

// A use that arrives while the VM is being paused waits for the pause and
// wakes it: it is never served by a paused VM.
func TestUseDuringPauseWaitsAndWakes(t *testing.T) {
	f := newFakeVM()
	m := New(f.config(10 * time.Second))
	inPause, letPause := make(chan struct{}), make(chan struct{})
	f.pauseHook = func(context.Context) error { close(inPause); <-letPause; return nil }
	useArrivesMidPause(t, f, m, inPause, letPause)
}

// A failed wake is the use's error; the count of uses stays right.
func TestFailedWake(t *testing.T) {
	f := newFakeVM()
	m := New(f.config(10 * time.Second))
	f.advance(11 * time.Second)
	m.maybePause(context.Background())
	f.wakeErr = errors.New("QMP cont: the VM is gone")
	if _, err := m.Hold(context.Background()); err == nil || !strings.Contains(err.Error(), "the VM is gone") {
		t.Fatalf("Hold with a failing wake: %v", err)
	}
	if st := m.State(); st.Users != 0 || !st.Paused {
		t.Fatalf("after a failed wake: %+v", st)
	}
}

// Idle 0 never pauses; SetAfter turns it on for a running VM, and Close
// wakes a paused VM and ends the pausing.
func TestSetAfterAndClose(t *testing.T) {
	f := newFakeVM()
	m := New(f.config(0))
	ctx := context.Background()
	f.advance(24 * time.Hour)
	m.maybePause(ctx)
	if got := f.ran(); got != "" {
		t.Fatalf("idle 0 acted: %q", got)
	}
	m.SetAfter(10 * time.Second)
	m.maybePause(ctx)
	if m.State().Paused {
		t.Fatal("paused at once: the period counts from SetAfter")
	}
	f.advance(11 * time.Second)
	m.maybePause(ctx)
	if !m.State().Paused {
		t.Fatalf("not paused after SetAfter's period: %q", f.ran())
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f.advance(time.Hour)
	m.maybePause(ctx)
	if got := f.ran(); got != "busy? prepare pause wake" || f.paused {
		t.Fatalf("after Close: %q, vm paused %v", got, f.paused)
	}
}

// Run pauses on its own with a short period, in real time.
func TestRunPauses(t *testing.T) {
	f := newFakeVM()
	cfg := f.config(300 * time.Millisecond)
	cfg.Now = nil
	m := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for !m.State().Paused {
		if time.Now().After(deadline) {
			t.Fatalf("Run did not pause within 5 s: %q", f.ran())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A nil Monitor (an instance without the idle pause) never pauses and
// holds for free.
func TestNilMonitor(t *testing.T) {
	var m *Monitor
	release, err := m.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	release()
	m.SetAfter(time.Second)
	m.Run(context.Background())
	if m.Paused() || m.State() != (State{}) || m.Wake(context.Background()) != nil || m.Close(context.Background()) != nil {
		t.Error("a nil Monitor did something")
	}
}

// A use that arrives once the pause is decided must not cut it short: the
// VMM pauses whatever happens to the reply, so a cut Pause would leave the
// monitor believing in a running VM that is frozen. The use waits for the
// pause, then wakes the VM.
func TestUseDuringPauseDoesNotCutIt(t *testing.T) {
	f := newFakeVM()
	m := New(f.config(10 * time.Second))
	inPause, letPause := make(chan struct{}), make(chan struct{})
	f.pauseHook = func(ctx context.Context) error {
		close(inPause)
		select {
		case <-letPause:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	useArrivesMidPause(t, f, m, inPause, letPause)
}

// A Pause that fails after the VMM paused (a lost reply) is taken for
// what the VMM says: the monitor knows the VM is paused and the next use
// wakes it.
func TestFailedPauseAsksTheVMM(t *testing.T) {
	f := newFakeVM()
	m := New(f.config(10 * time.Second))
	f.pauseHook = func(context.Context) error { return errors.New("QMP stop: read: i/o timeout") }
	f.advance(11 * time.Second)
	m.maybePause(context.Background())
	if !m.State().Paused {
		t.Fatalf("the VMM paused but the monitor says running (%q)", f.ran())
	}
	release, err := m.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	release()
	if got := f.ran(); got != "busy? prepare pause status? wake" || f.paused {
		t.Fatalf("after a failed pause: %q, vm paused %v", got, f.paused)
	}
}

// A failed wake of a VM the VMM says runs (the reply to cont was lost)
// leaves the monitor knowing it runs: the next use does not wake it again.
func TestFailedWakeOfARunningVM(t *testing.T) {
	f := newFakeVM()
	m := New(f.config(10 * time.Second))
	f.advance(11 * time.Second)
	m.maybePause(context.Background())
	f.mu.Lock()
	f.paused = false // cont went through
	f.wakeErr = errors.New("QMP cont: read: i/o timeout")
	f.mu.Unlock()
	if _, err := m.Hold(context.Background()); err == nil {
		t.Fatal("Hold with a failing wake succeeded")
	}
	if m.State().Paused {
		t.Fatalf("the VMM runs but the monitor says paused (%q)", f.ran())
	}
	release, err := m.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	release()
	if got := f.ran(); got != "busy? prepare pause wake status?" {
		t.Fatalf("calls %q, want one wake and one status query", got)
	}
}

// useArrivesMidPause lets m decide a pause of f, which blocks in its hook
// until letPause (closing inPause first); meanwhile a use holds m. The use
// must wait for the pause, then wake the VM: the VM and the monitor both
// end up running.
func useArrivesMidPause(t *testing.T, f *fakeVM, m *Monitor, inPause, letPause chan struct{}) {
	t.Helper()
	f.advance(11 * time.Second)
	done := make(chan struct{})
	go func() { m.maybePause(context.Background()); close(done) }()
	<-inPause
	held := make(chan error, 1)
	go func() {
		release, err := m.Hold(context.Background())
		if err == nil {
			release()
		}
		held <- err
	}()
	select {
	case err := <-held:
		t.Fatalf("Hold returned (%v) while the pause was under way", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(letPause)
	<-done
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if got := f.ran(); got != "busy? prepare pause wake" || f.paused || m.State().Paused {
		t.Fatalf("use during pause: %q, vm paused %v, monitor paused %v", got, f.paused, m.State().Paused)
	}
}
