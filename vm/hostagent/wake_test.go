package hostagent

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClocks is a host whose clocks the test moves.
type fakeClocks struct {
	mu         sync.Mutex
	boot, mono time.Duration
}

func (c *fakeClocks) read() (time.Duration, time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.boot, c.mono, nil
}

// pass moves both clocks: awake time, or a frozen process (the host ran
// on, this process did not look).
func (c *fakeClocks) pass(d time.Duration) { c.mu.Lock(); c.boot += d; c.mono += d; c.mu.Unlock() }

// sleep moves only the boot clock, as a suspended host does.
func (c *fakeClocks) sleep(d time.Duration) { c.mu.Lock(); c.boot += d; c.mu.Unlock() }

// A suspend (the boot clock ahead of the monotonic one) and a frozen
// process (a look that came late) are wakes, each reported once with how
// long it lasted; looks on time and clock noise below a second are not.
func TestWatchWakesOnSleepAndFreeze(t *testing.T) {
	clocks := &fakeClocks{boot: 100 * time.Second, mono: 90 * time.Second}
	ticks := make(chan time.Time)
	woke := make(chan wake, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { watchWakes(ctx, clocks.read, ticks, func(w wake) { woke <- w }); close(done) }()
	look := func(move func()) (wake, bool) {
		move()
		ticks <- time.Now()
		ticks <- time.Now() // a second look: the first one's report is in
		select {
		case w := <-woke:
			return w, true
		default:
			return wake{}, false
		}
	}
	if w, ok := look(func() { clocks.pass(wakeLook) }); ok {
		t.Errorf("a look on time reported a wake %+v", w)
	}
	if w, ok := look(func() { clocks.pass(wakeLook); clocks.sleep(800 * time.Millisecond) }); ok {
		t.Errorf("800 ms of boot-clock lead reported a wake %+v", w)
	}
	if w, ok := look(func() { clocks.pass(wakeLook); clocks.sleep(42 * time.Minute) }); !ok || w.frozen || w.away != 42*time.Minute {
		t.Errorf("after a 42 min suspend: %+v %v, want a wake of 42m0s asleep", w, ok)
	}
	if w, ok := look(func() { clocks.pass(wakeLook + 90*time.Second) }); !ok || !w.frozen || w.away != 90*time.Second {
		t.Errorf("after 90 s frozen: %+v %v, want a wake of 1m30s frozen", w, ok)
	}
	if w, ok := look(func() { clocks.pass(wakeLook + 3*time.Second) }); ok {
		t.Errorf("a look 3 s late (a loaded host) reported a wake %+v", w)
	}
	cancel()
	<-done
}
