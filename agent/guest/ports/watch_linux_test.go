package ports

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
)

// TestWatchPortsTrimsMemoryOnceWhenTheHostGoesQuiet: the agent returns the
// memory a burst left behind when the host goes quiet, once per quiet spell,
// not on every idle scan.
func TestWatchPortsTrimsMemoryOnceWhenTheHostGoesQuiet(t *testing.T) {
	w, _ := newTestWatch(t)
	w.Poll = Poll{Fast: 20 * time.Millisecond, Busy: 100 * time.Millisecond, Idle: 20 * time.Millisecond}
	var trims atomic.Int32
	w.trimMemory = func() { trims.Add(1) }
	serve(t, w)
	waitFor := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for trims.Load() < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := trims.Load(); got != n {
			t.Fatalf("%d trims, want %d", got, n)
		}
	}
	waitFor(1)
	time.Sleep(300 * time.Millisecond) // many idle scans
	if got := trims.Load(); got != 1 {
		t.Fatalf("%d trims while idle, want 1", got)
	}
	w.NoteHostActivity() // the host is busy again
	waitFor(2)
}

// The watch's first listing ends with the synced mark; after it, a port
// that opens and closes is reported each time, and the agent's own is not.
func TestWatchReportsChanges(t *testing.T) {
	w, _ := newTestWatch(t)
	own, err := net.Listen("tcp4", "127.0.0.1:0")
	must(t, err)
	defer own.Close()
	w.HideOwnPort("tcp", own.Addr().(*net.TCPAddr).Port)
	ch := serve(t, w)
	await := func(want agent.PortEvent) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev := <-ch:
				if ev.Port == own.Addr().(*net.TCPAddr).Port {
					t.Fatalf("agent's own listener reported: %+v", ev)
				}
				if ev == want {
					return
				}
			case <-timeout:
				t.Fatalf("no event %+v", want)
			}
		}
	}
	await(agent.PortEvent{Synced: true})
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	must(t, err)
	p := ln.Addr().(*net.TCPAddr).Port
	await(agent.PortEvent{Added: true, Proto: "tcp", IP: "127.0.0.1", Port: p})
	ln.Close()
	await(agent.PortEvent{Proto: "tcp", IP: "127.0.0.1", Port: p})
}

// A watch whose context ends stops and closes the host's stream.
func TestWatchEndsWithItsContext(t *testing.T) {
	w, _ := newTestWatch(t)
	host, guest := net.Pipe()
	defer host.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Serve(ctx, guest); close(done) }()
	if _, err := agent.ReadResponse(host); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, host) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch outlived its context")
	}
}

// Events come sorted by port, then protocol, then address, so the host's
// log reads the same each time.
func TestDiffSortsEvents(t *testing.T) {
	old := map[key]bool{{"tcp", "0.0.0.0", 80}: true}
	cur := map[key]bool{{"udp", "0.0.0.0", 53}: true, {"tcp", "::", 53}: true, {"tcp", "0.0.0.0", 53}: true}
	got := diff(old, cur)
	want := []agent.PortEvent{
		{Added: true, Proto: "tcp", IP: "0.0.0.0", Port: 53},
		{Added: true, Proto: "tcp", IP: "::", Port: 53},
		{Added: true, Proto: "udp", IP: "0.0.0.0", Port: 53},
		{Proto: "tcp", IP: "0.0.0.0", Port: 80},
	}
	if len(got) != len(want) {
		t.Fatalf("diff = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("diff = %+v, want %+v", got, want)
		}
	}
}
