package hostagent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/config"
)

// pausableMachine is an agentMachine whose pause the test can see; a
// paused guest would not answer, which the agent's own tests cover.
type pausableMachine struct {
	*agentMachine
	mu     sync.Mutex
	paused bool
	pauses int
	// unpauseErr, when set, is what Unpause returns after unpausing: the
	// VMM did it, its answer was lost.
	unpauseErr error
}

func (m *pausableMachine) Pause(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = true
	m.pauses++
	return nil
}

func (m *pausableMachine) Unpause(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = false
	return m.unpauseErr
}

func (m *pausableMachine) Paused(context.Context) (bool, error) { return m.isPaused(), nil }

func (m *pausableMachine) isPaused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused
}

// The host agent pauses an unused VM after the idle period, keeps the
// agent session across the pause, and a `vmdock ssh` stream wakes it
// before it opens; status tells both states.
func TestIdlePauseAndWakeKeepTheSession(t *testing.T) {
	m := &pausableMachine{agentMachine: newAgentMachine()}
	w := newGuestWorld(t)
	m.start(w.agent(&recordingOS{}))
	ha := testHostAgent(t, m)
	ha.cfg.Idle = config.Duration(300 * time.Millisecond)
	ha.idle.monitor = ha.newIdleMonitor()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ha.redial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ha.adoptClient(c)
	go ha.runIdle(ctx)

	waitFor(t, 10*time.Second, "idle pause", func() bool { return m.isPaused() })
	st := ha.status().Idle
	if st == nil || !st.Paused || st.PausedSince == nil || st.Pauses != 1 {
		t.Fatalf("status while paused: %+v", st)
	}
	if !c.Keepalive().Suspended() {
		t.Error("the host still pings a paused guest")
	}

	conn, err := ha.openAgentStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.isPaused() {
		t.Fatal("a vmdock ssh stream opened on a paused VM")
	}
	if c.Keepalive().Suspended() {
		t.Error("keepalive still suspended after the wake")
	}
	if now, _ := ha.session.link.state(); now != c || ended(c) {
		t.Fatal("the agent session did not survive the pause")
	}
	// Open, the stream keeps the VM up however long the period passes.
	time.Sleep(time.Second)
	if m.isPaused() {
		t.Fatal("paused under an open stream")
	}
	conn.Close()
	waitFor(t, 10*time.Second, "second idle pause", func() bool { return m.isPaused() })
	if st := ha.status().Idle; st.Pauses != 2 || st.LastWakeMs == nil {
		t.Fatalf("status after a wake and a second pause: %+v", st)
	}
	if err := ha.idle.monitor.Close(ctx); err != nil || m.isPaused() {
		t.Fatalf("Close (stop) left the VM paused: %v", err)
	}
}

// An unpause that went through but reported a failure (its answer lost)
// is still a wake: the VM runs, so the pings resume and the use goes on.
func TestWakeWhoseUnpauseAnswerWasLost(t *testing.T) {
	m := &pausableMachine{agentMachine: newAgentMachine()}
	w := newGuestWorld(t)
	m.start(w.agent(&recordingOS{}))
	ha := testHostAgent(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ha.redial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ha.adoptClient(c)
	if err := ha.pauseIdle(ctx); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.unpauseErr = errors.New("QMP cont: read: i/o timeout")
	m.mu.Unlock()
	if err := ha.wakeFromIdle(ctx); err != nil {
		t.Fatalf("wake of a VM that runs: %v", err)
	}
	if c.Keepalive().Suspended() {
		t.Error("keepalive still suspended after the wake")
	}
	// a VM the VMM says is still paused: the wake failed
	if err := ha.pauseIdle(ctx); err != nil {
		t.Fatal(err)
	}
	stuck := &stuckPauser{pausableMachine: m}
	ha.mu.Lock()
	ha.run.machine = stuck
	ha.mu.Unlock()
	if err := ha.wakeFromIdle(ctx); err == nil {
		t.Error("a wake that left the VM paused succeeded")
	}
}

// stuckPauser's Unpause fails and leaves the VM paused.
type stuckPauser struct{ *pausableMachine }

func (m *stuckPauser) Unpause(context.Context) error {
	return errors.New("QMP cont: VM is gone")
}
