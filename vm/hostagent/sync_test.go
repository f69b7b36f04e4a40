package hostagent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
)

// `vmdock sync flush|reset PATH` names a sync mount by its host folder or
// any path inside it; anything else is refused naming the sync mounts.
func TestSyncIDByHostPath(t *testing.T) {
	ha := &hostAgent{cfg: config.Config{Mounts: []config.Mount{
		{Location: "/home/u", GuestPath: "/home/u", Writable: true},
		{Location: "/home/u/app", GuestPath: "/home/u/app", Writable: true, Mode: mounts.ModeSync},
	}}}
	want := mounts.SyncID("/home/u/app")
	for _, p := range []string{"/home/u/app", "/home/u/app/", "/home/u/app/src/x.php"} {
		if id, err := ha.syncID(p); err != nil || id != want {
			t.Errorf("syncID(%q) = %q, %v; want %q", p, id, err, want)
		}
	}
	for _, p := range []string{"/home/u", "/home/u/application", "/elsewhere"} {
		if _, err := ha.syncID(p); err == nil || !strings.Contains(err.Error(), "not in a sync mount; sync mounts: [/home/u/app]") {
			t.Errorf("syncID(%q): %v; want a refusal naming the sync mounts", p, err)
		}
	}
}

// The guest is asked to bind each sync mount's copy at its guest path,
// owned by the host user; the engine syncs the host folder with that copy
// on the data disk, leaving the excludes in the guest.
func TestSyncMountRequestAndEngineView(t *testing.T) {
	sy := mounts.Syncs([]mounts.Mount{{Location: "/src/app", GuestPath: "/app", Writable: true, Mode: mounts.ModeSync, Exclude: []string{"vendor"}}})[0]
	req := syncMountRequest(sy)
	if req.Type != "sync" || req.Tag != sy.ID || req.Target != "/app" || req.HostPath != "/src/app" {
		t.Fatalf("mount request %+v", req)
	}
	m := syncMount(sy)
	if m.HostPath != "/src/app" || m.GuestPath != "/var/lib/vmdock-data/sync/"+sy.ID || len(m.Ignores) != 1 || m.Ignores[0] != "/vendor" {
		t.Fatalf("engine mount %+v", m)
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
