package filesync

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts"
)

// `vmdock sync flush|reset PATH` names a sync mount by its host folder or
// any path inside it; anything else is refused naming the sync mounts.
func TestSyncIDByHostPath(t *testing.T) {
	s := NewSyncMounts(SyncConfig{Syncs: mounts.Syncs([]mounts.Mount{
		{Location: "/home/u", GuestPath: "/home/u", Writable: true},
		{Location: "/home/u/app", GuestPath: "/home/u/app", Writable: true, Mode: mounts.ModeSync},
	})})
	want := mounts.SyncID("/home/u/app")
	for _, p := range []string{"/home/u/app", "/home/u/app/", "/home/u/app/src/x.php"} {
		if id, err := s.syncID(p); err != nil || id != want {
			t.Errorf("syncID(%q) = %q, %v; want %q", p, id, err, want)
		}
	}
	for _, p := range []string{"/home/u", "/home/u/application", "/elsewhere"} {
		if _, err := s.syncID(p); err == nil || !strings.Contains(err.Error(), "not in a sync mount; sync mounts: [/home/u/app]") {
			t.Errorf("syncID(%q): %v; want a refusal naming the sync mounts", p, err)
		}
	}
}

// The guest is asked to bind each sync mount's copy at its guest path,
// owned by the host user; the engine syncs the host folder with that copy
// on the data disk, leaving the excludes in the guest.
func TestSyncMountRequestAndEngineView(t *testing.T) {
	sy := mounts.Syncs([]mounts.Mount{{Location: "/src/app", GuestPath: "/app", Writable: true, Mode: mounts.ModeSync, Exclude: []string{"vendor"}}})[0]
	req := MountRequest(sy)
	if req.Type != "sync" || req.Tag != sy.ID || req.Target != "/app" || req.HostPath != "/src/app" {
		t.Fatalf("mount request %+v", req)
	}
	m := syncMount(sy, false)
	if m.HostPath != "/src/app" || m.GuestPath != "/var/lib/vmdock-data/sync/"+sy.ID || len(m.Ignores) != 1 || m.Ignores[0] != "/vendor" || m.UID != os.Getuid() {
		t.Fatalf("engine mount %+v", m)
	}
	// On a server the copy is the folder at the guest path itself, owned
	// by the SSH user: the laptop's ids mean nothing there.
	m = syncMount(sy, true)
	if m.HostPath != "/src/app" || m.GuestPath != "/app" || m.UID != -1 || m.GID != -1 || len(m.Ignores) != 1 {
		t.Fatalf("engine mount on a server %+v", m)
	}
}

// Changes during a flush make exactly one more flush after it: the last
// change is synced at once, and a burst does not queue a flush per event.
func TestFlusherCoalesces(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	release := make(chan struct{})
	f := newFlusher(func(ctx context.Context, id string) error {
		mu.Lock()
		calls[id]++
		n := calls[id]
		mu.Unlock()
		if n == 1 {
			<-release
		}
		return nil
	})
	ctx := context.Background()
	f.kick(ctx, "a")
	time.Sleep(20 * time.Millisecond)
	for i := 0; i < 5; i++ {
		f.kick(ctx, "a")
	}
	f.kick(ctx, "b")
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		idle := len(f.running) == 0
		f.mu.Unlock()
		if idle || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["a"] != 2 || calls["b"] != 1 {
		t.Fatalf("flushes %v; want a:2 (one more after the burst), b:1", calls)
	}
}

// silentAgent connects a real agent client to a guest end that says hello
// and then never reads again, like a killed agent behind an open channel.
func silentAgent(t *testing.T) *agent.Client {
	t.Helper()
	host, guest := net.Pipe()
	t.Cleanup(func() { host.Close(); guest.Close() })
	go agent.GuestHello(guest)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := agent.Connect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// With sync mounts and a guest agent that is gone, stop does not wait for
// the sync engine to give up: the agent's silence skips the last flush at
// once, and the stop says what that means.
func TestFlushSyncSkipsASilentAgent(t *testing.T) {
	ctx := context.Background()
	s := NewSyncMounts(SyncConfig{DataDir: t.TempDir(), Live: func(context.Context) (*agent.Client, error) {
		return nil, errors.New("no guest")
	}})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if s.manager() == nil {
		t.Fatal("the engine does not run over an existing data folder")
	}
	const answer = 300 * time.Millisecond
	var notes []string
	c := silentAgent(t)
	start := time.Now()
	if !s.FlushBeforeStop(ctx, c, answer, func(n string) { notes = append(notes, n) }) {
		t.Fatal("FlushBeforeStop did not report the silent agent")
	}
	if took := time.Since(start); took > answer+time.Second {
		t.Fatalf("FlushBeforeStop took %s with the agent silent; want about %s", took, answer)
	}
	if len(notes) == 0 || !strings.Contains(notes[len(notes)-1], "sync mounts: not flushed, the guest agent does not answer") {
		t.Fatalf("stop notes %q", notes)
	}
}

// A SyncMounts that never started (or a nil one) refuses the `vmdock sync`
// commands, reports no status and stops cleanly.
func TestSyncMountsNotRunning(t *testing.T) {
	ctx := context.Background()
	for _, s := range []*SyncMounts{nil, NewSyncMounts(SyncConfig{DataDir: t.TempDir() + "/none"})} {
		if err := s.Flush(ctx, ""); !errors.Is(err, errNotRunning) {
			t.Errorf("Flush: %v", err)
		}
		if st := s.Status(); st != nil {
			t.Errorf("Status: %+v", st)
		}
		if s.FlushBeforeStop(ctx, nil, time.Second, func(string) { t.Error("a note without an engine") }) {
			t.Error("FlushBeforeStop reports a gone agent without an engine")
		}
		if err := s.Start(ctx); err != nil {
			t.Errorf("Start without sync mounts or data folder: %v", err)
		}
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
}
