package memtrim

import (
	"context"
	"testing"
	"time"
)

// The trim runs once per quiet spell: on the first quiet period after busy
// ones, never twice in a row, and again after the next busy period.
func TestTrimNowOncePerQuietSpell(t *testing.T) {
	q := quietness{last: 0, quietBytes: 1 << 20}
	steps := []struct {
		total uint64
		trim  bool
	}{
		{5 << 20, false},           // busy
		{5<<20 + 100, true},        // quiet: trim
		{5<<20 + 200, false},       // still quiet
		{5<<20 + 300, false},       // still quiet
		{9 << 20, false},           // busy again
		{9<<20 + 1, true},          // quiet: trim again
		{9<<20 + 1 + 1<<20, false}, // exactly the threshold counts as busy
		{9<<20 + 1 + 1<<20, true},
	}
	for i, s := range steps {
		if got := q.trimNow(s.total); got != s.trim {
			t.Fatalf("period %d (total %d): trim %v, want %v", i, s.total, got, s.trim)
		}
	}
}

// The loop reads the total once at the start and once per tick, trims on
// a quiet tick, and ends with its context.
func TestTrimWhenQuietFollowsTicks(t *testing.T) {
	totals := make(chan uint64, 4)
	totals <- 0 // start
	totals <- 0 // first tick: quiet
	ticks := make(chan time.Time, 1)
	trimmed := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		trimWhenQuiet(ctx, ticks, func() uint64 { return <-totals }, 1<<20, func() { trimmed <- struct{}{} })
		close(done)
	}()
	ticks <- time.Time{}
	select {
	case <-trimmed:
	case <-time.After(5 * time.Second):
		t.Fatal("no trim after a quiet period")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
}

func TestAllocatedBytesGrowsWithAllocations(t *testing.T) {
	before := allocatedBytes()
	sink := make([][]byte, 0, 64)
	for range 64 {
		sink = append(sink, make([]byte, 64<<10))
	}
	if after := allocatedBytes(); after-before < 4<<20 {
		t.Fatalf("allocation counter moved %d bytes after 4 MiB of allocations (%d slices)", after-before, len(sink))
	}
}
