package bench

import (
	"context"
	"testing"
	"time"
)

func TestSettleWaitsForTheEchoCycle(t *testing.T) {
	start := time.Now()
	flushed := false
	// A cycle 100 ms after the flush (the echo), then quiet.
	state := func(context.Context) (SyncState, error) {
		since := time.Since(start)
		switch {
		case since < 100*time.Millisecond:
			return SyncState{State: "watching", LastSync: start}, nil
		case since < 150*time.Millisecond:
			return SyncState{State: "scanning", LastSync: start}, nil
		default:
			return SyncState{State: "watching", LastSync: start.Add(150 * time.Millisecond)}, nil
		}
	}
	err := Settle(context.Background(), func(context.Context) error { flushed = true; return nil }, state, 120*time.Millisecond)
	if err != nil || !flushed {
		t.Fatalf("settle: %v, flushed %v", err, flushed)
	}
	// Quiet only from the echo's end (150 ms) for 120 ms.
	if d := time.Since(start); d < 270*time.Millisecond {
		t.Errorf("settled after %v, before the echo cycle went quiet", d)
	}
}

func TestSettleEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	busy := func(context.Context) (SyncState, error) { return SyncState{State: "scanning"}, nil }
	if err := Settle(ctx, func(context.Context) error { return nil }, busy, 50*time.Millisecond); err == nil {
		t.Error("a never-quiet sync settled")
	}
}
