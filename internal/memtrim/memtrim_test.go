package memtrim

import (
	"testing"
)

// The trim runs once per quiet spell: on the first quiet period after
// busy ones, never twice in a row, and again after the next busy period or
// once the resident set grew by the threshold since the last trim.
func TestTrimNowOncePerQuietSpell(t *testing.T) {
	const mib = 1 << 20
	q := quietness{quietBytes: mib, grown: true}
	steps := []struct {
		alloc, resident uint64
		trim            bool
	}{
		{5 * mib, 30 * mib, false},             // busy (the boot)
		{5*mib + 100, 30 * mib, true},          // quiet: trim, down to 20 MiB
		{5*mib + 200, 20 * mib, false},         // still quiet, nothing grew
		{5*mib + 300, 20*mib + 900<<10, false}, // grew less than the threshold
		{9 * mib, 22 * mib, false},             // busy again
		{9*mib + 1, 22 * mib, true},            // quiet: trim, down to 20 MiB
		{9*mib + 2, 22 * mib, true},            // quiet, but code paged back in: 2 MiB more than after the trim
		{9*mib + 3, 20 * mib, false},
		{10*mib + 3, 20 * mib, false}, // exactly the threshold allocated is busy
		{10*mib + 4, 20 * mib, true},
	}
	after := []uint64{1: 20 * mib, 5: 20 * mib, 6: 20 * mib, 9: 20 * mib}
	for i, s := range steps {
		got := q.trimNow(s.alloc, s.resident)
		if got != s.trim {
			t.Fatalf("period %d (alloc %d, resident %d): trim %v, want %v", i, s.alloc, s.resident, got, s.trim)
		}
		if got {
			q.trimmed(after[i])
		}
	}
}

// Where the resident size is unknown (0), allocations alone decide.
func TestTrimNowWithoutResidentSize(t *testing.T) {
	q := quietness{quietBytes: 1 << 20, grown: true}
	for i, want := range []bool{true, false, false} {
		if got := q.trimNow(uint64(i), 0); got != want {
			t.Fatalf("period %d: trim %v, want %v", i, got, want)
		}
		if want {
			q.trimmed(0)
		}
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
