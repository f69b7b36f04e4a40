package agent

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// infoGuest is a guest agent that completes the handshake and answers
// OpInfo on the guest end of a pipe.
func infoGuest(guest net.Conn, info Info) {
	defer guest.Close()
	sess, err := guestSession(guest)
	if err != nil {
		return
	}
	defer sess.Close()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		var req Request
		if ReadJSONLine(st, &req) == nil && req.Op == OpInfo {
			WriteJSONLine(st, Response{OK: true, Info: &info})
		}
		st.Close()
	}
}

// The guest is not up for the first attempts; DialUntilUp keeps going,
// backs off, prepares the client before Info, and returns the answer.
func TestDialUntilUpRetriesUntilTheGuestAnswers(t *testing.T) {
	var dials atomic.Int32
	dial := func(ctx context.Context) (net.Conn, error) {
		if dials.Add(1) <= 2 {
			return nil, errors.New("no such device yet")
		}
		host, guest := net.Pipe()
		go infoGuest(guest, Info{Version: "v1", Uptime: 3})
		return host, nil
	}
	var failed []int
	prepared := false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, info, err := DialUntilUp(ctx, dial, RetryOptions{
		Delay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond,
		Prepare: func(*Client) { prepared = true },
		Failed:  func(attempt int, err error) { failed = append(failed, attempt) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if info.Version != "v1" || info.Uptime != 3 || !prepared || len(failed) != 2 || dials.Load() != 3 {
		t.Fatalf("info %+v prepared %v failed %v dials %d", info, prepared, failed, dials.Load())
	}
}

// Check ends the retries with its own error: a VM that exited has no
// agent to wait for.
func TestDialUntilUpStopsOnCheck(t *testing.T) {
	gone := errors.New("the VM exited")
	n := 0
	_, _, err := DialUntilUp(context.Background(), func(context.Context) (net.Conn, error) {
		return nil, errors.New("not yet")
	}, RetryOptions{Delay: time.Millisecond, Check: func() error {
		if n++; n > 3 {
			return gone
		}
		return nil
	}})
	if !errors.Is(err, gone) {
		t.Fatalf("err = %v, want the Check's", err)
	}
}

// A guest that never answers ends with ErrNotUp naming the last error,
// and a hung attempt is cut by AttemptTimeout, not left to block.
func TestDialUntilUpGivesUpWithTheLastError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := DialUntilUp(ctx, func(context.Context) (net.Conn, error) {
		host, _ := net.Pipe() // a channel with nobody behind it: the handshake hangs
		return host, nil
	}, RetryOptions{AttemptTimeout: 50 * time.Millisecond, Delay: 10 * time.Millisecond})
	if !errors.Is(err, ErrNotUp) || !strings.Contains(err.Error(), "handshake") {
		t.Fatalf("err = %v, want ErrNotUp with the handshake error", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("gave up after %s", d)
	}
}
