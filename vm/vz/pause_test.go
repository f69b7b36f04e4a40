package vz

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
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

// Paused follows vz's state; a wake vz refuses is reported with the
// machine's name and leaves the guest paused.
func TestPausedAndARefusedWake(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	ctx := t.Context()
	if p, err := m.Paused(ctx); err != nil || p {
		t.Fatalf("Paused of a running VM = %v, %v", p, err)
	}
	if err := m.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := m.Paused(ctx); err != nil || !p {
		t.Fatalf("Paused after Pause = %v, %v", p, err)
	}
	f.mu.Lock()
	f.resumeErr = errors.New("invalid state transition")
	f.mu.Unlock()
	err := m.Unpause(ctx)
	if err == nil || !strings.Contains(err.Error(), "unpause test") || !strings.Contains(err.Error(), "invalid state transition") {
		t.Errorf("refused unpause: %v, want vz's reason and the machine's name", err)
	}
	if p, _ := m.Paused(ctx); !p {
		t.Error("the guest is no longer paused after a refused wake")
	}
}

// Once the guest powered off, pause, wake and the pause check say the VM
// is not running instead of asking vz about a machine that is gone.
func TestPauseCallsOnAStoppedMachine(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	f.guestPowerOff()
	if err, ok := waitResult(m, time.Second); !ok || err != nil {
		t.Fatalf("Wait after a power-off = %v (returned %v)", err, ok)
	}
	ctx := t.Context()
	p, err := m.Paused(ctx)
	for name, err := range map[string]error{"pause": m.Pause(ctx), "paused": err, "unpause": m.Unpause(ctx)} {
		if err == nil || !strings.Contains(err.Error(), "not running") {
			t.Errorf("%s of a stopped VM: %v, want \"not running\"", name, err)
		}
	}
	if p {
		t.Error("a stopped VM reported paused")
	}
	if got := f.called(); !slices.Equal(got, []string{"Start"}) {
		t.Errorf("vz calls %q, want none after the power-off", got)
	}
}

func TestStateNames(t *testing.T) {
	for s, want := range map[vmState]string{stateStopped: "stopped", statePaused: "paused", stateRestoring: "restoring", vmState(42): "state(42)", vmState(-1): "state(-1)"} {
		if got := s.String(); got != want {
			t.Errorf("vmState(%d) = %q, want %q", int(s), got, want)
		}
	}
}
