package hostagent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

func idleHostAgent(t *testing.T) *hostAgent {
	t.Helper()
	inst := &store.Instance{Name: "default", Dir: t.TempDir()}
	return newHostAgent(inst, config.Config{Idle: config.Duration(30 * time.Minute)}, Options{})
}

// `vmdock set idle` takes 0 or a period from the minimum up, and status
// shows the new period at once.
func TestSetIdle(t *testing.T) {
	ha := idleHostAgent(t)
	if got := ha.idleStatus().After; got != "30m0s" {
		t.Fatalf("idle after %q, want the config's 30m0s", got)
	}
	for _, bad := range []time.Duration{-time.Minute, time.Second} {
		err := ha.setIdle(bad)
		if err == nil || !strings.Contains(err.Error(), "is not accepted") || !strings.Contains(err.Error(), "0 (never pause)") {
			t.Errorf("setIdle(%s) = %v, want a refusal saying what is accepted", bad, err)
		}
	}
	if got := ha.idleStatus().After; got != "30m0s" {
		t.Errorf("a refused period changed it to %q", got)
	}
	for _, ok := range []struct {
		d    time.Duration
		want string
	}{{2 * time.Hour, "2h0m0s"}, {0, "0"}} {
		if err := ha.setIdle(ok.d); err != nil {
			t.Fatalf("setIdle(%s): %v", ok.d, err)
		}
		if got := ha.idleStatus().After; got != ok.want {
			t.Errorf("after setIdle(%s): %q, want %q", ok.d, got, ok.want)
		}
	}
}

// Control actions and added routes hold the VM while they run, and let
// go after; a missing action stays missing (its route answers 404).
func TestHeldActionsHoldTheVMWhileTheyRun(t *testing.T) {
	ha := idleHostAgent(t)
	if ha.heldAction(nil) != nil || ha.heldSyncAction(nil) != nil {
		t.Fatal("a nil action became a route")
	}
	var usersDuring int
	act := ha.heldAction(func(_ context.Context, arg string) error {
		usersDuring = ha.idleStatus().Users
		if arg != "m1" {
			return errors.New("wrong argument " + arg)
		}
		return nil
	})
	if err := act(t.Context(), "m1"); err != nil || usersDuring != 1 {
		t.Errorf("held action: %v, %d users while it ran; want 1", err, usersDuring)
	}
	if u := ha.idleStatus().Users; u != 0 {
		t.Errorf("%d users after the action, want 0", u)
	}

	h := ha.heldHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		usersDuring = ha.idleStatus().Users
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/scratch", nil))
	if rec.Code != http.StatusAccepted || usersDuring != 1 || ha.idleStatus().Users != 0 {
		t.Errorf("held route: %d, %d users during, %d after", rec.Code, usersDuring, ha.idleStatus().Users)
	}
}

// After a wake, sync requests wait until the sync mounts the pause
// halted run again; a request whose context ends first is not run.
func TestHeldSyncActionWaitsForTheSyncsBack(t *testing.T) {
	ha := idleHostAgent(t)
	back := make(chan struct{})
	ha.idle.syncsBack = back
	ran := make(chan string, 2)
	act := ha.heldSyncAction(func(_ context.Context, id string) error { ran <- id; return nil })

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := act(ctx, "early"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a sync request before the syncs are back: %v, want its context's end", err)
	}
	done := make(chan error, 1)
	go func() { done <- act(t.Context(), "m1") }()
	select {
	case id := <-ran:
		t.Fatalf("%s ran before the syncs were back", id)
	case <-time.After(50 * time.Millisecond):
	}
	close(back)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if id := <-ran; id != "m1" {
		t.Errorf("ran %q, want m1", id)
	}
}
