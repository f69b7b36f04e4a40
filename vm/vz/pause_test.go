package vz

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The idle pause and wake are vz's pause and resume; a second pause
// changes nothing, and vz's refusals come back naming the machine.
func TestPauseAndUnpause(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	ctx := t.Context()
	if err := m.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.called(); !slices.Equal(got, []string{"Start", "Pause", "Resume"}) {
		t.Fatalf("vz calls %q", got)
	}
	if err := m.Unpause(ctx); err == nil || !strings.Contains(err.Error(), "running, not paused") {
		t.Errorf("unpause of a running VM: %v", err)
	}
	f.mu.Lock()
	f.pauseErr = errors.New("invalid state transition")
	f.mu.Unlock()
	if err := m.Pause(ctx); err == nil || !strings.Contains(err.Error(), "invalid state transition") {
		t.Errorf("refused pause: %v", err)
	}
}
