package qemu

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Pause and Unpause are QMP stop and cont; QEMU's refusal and an exited
// VM are errors that say which.
func TestPauseAndUnpause(t *testing.T) {
	m, f := startFakeQMP(t, map[string][]string{
		"cont": {`{"return": {}}`, `{"error": {"class": "GenericError", "desc": "Resetting the Virtual Machine is required"}}`},
	})
	ctx := context.Background()
	if err := m.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unpause(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.commands(); !slices.Equal(got, []string{"stop", "cont"}) {
		t.Fatalf("QMP commands %q", got)
	}
	if err := m.Unpause(ctx); err == nil || !strings.Contains(err.Error(), "unpause: QMP cont: GenericError: Resetting") {
		t.Errorf("refused cont: %v", err)
	}
	close(m.done)
	if err := m.Pause(ctx); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("pause of an exited VM: %v", err)
	}
}

// A stop whose reply read is cut (its ctx ended) has still paused the VM,
// and QEMU still sends that reply. Every later command must get its own
// reply, not the stale one: Paused tells the truth, and the session that
// lost a reply is replaced by a new connection.
func TestPauseWithACutReplyKeepsQMPInStep(t *testing.T) {
	inStop, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	m, f := startFakeQMPWith(t, nil, func(cmd string) {
		if cmd == "stop" {
			once.Do(func() { close(inStop); <-release })
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-inStop; cancel() }()
	if err := m.Pause(ctx); err == nil {
		t.Fatal("Pause with its reply cut reported success")
	}
	close(release)
	bg := context.Background()
	if paused, err := m.Paused(bg); err != nil || !paused {
		t.Fatalf("after a cut stop: Paused = %v, %v; want true (QEMU stopped the VM)", paused, err)
	}
	if err := m.Unpause(bg); err != nil {
		t.Fatal(err)
	}
	if paused, err := m.Paused(bg); err != nil || paused {
		t.Fatalf("after cont: Paused = %v, %v; want false", paused, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns != 2 {
		t.Errorf("%d QMP connections, want 2: the session that lost a reply is made again", f.conns)
	}
}

// Every command carries an id, and a reply is taken only for the command
// whose id it bears.
func TestQMPRepliesAreMatchedByID(t *testing.T) {
	m, f := startFakeQMP(t, map[string][]string{
		// a stray reply to an earlier command, then this one's
		"query-status": {`{"return": {}, "id": 999999}` + "\n" + `{"return": {"status": "running", "running": true}}`},
	})
	if st, err := m.QueryStatus(context.Background()); err != nil || st != "running" {
		t.Fatalf("QueryStatus = %q, %v; want running (the stray reply skipped)", st, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noID {
		t.Error("a QMP command was sent without an id")
	}
}
