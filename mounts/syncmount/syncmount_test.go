package syncmount

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCreateEditDeleteBothWays(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.host, "a.txt"), "host a")
	writeFile(t, filepath.Join(e.host, "dir", "b.txt"), "host b")
	e.ensure(e.mount())
	wantFile(t, filepath.Join(e.guest, "a.txt"), "host a")
	wantFile(t, filepath.Join(e.guest, "dir", "b.txt"), "host b")

	// guest -> host: a container edits, creates and deletes.
	writeFile(t, filepath.Join(e.guest, "a.txt"), "guest edit")
	writeFile(t, filepath.Join(e.guest, "new", "c.txt"), "guest c")
	mustRemove(t, filepath.Join(e.guest, "dir", "b.txt"))
	e.flush()
	wantFile(t, filepath.Join(e.host, "a.txt"), "guest edit")
	wantFile(t, filepath.Join(e.host, "new", "c.txt"), "guest c")
	wantFile(t, filepath.Join(e.host, "dir", "b.txt"), "<missing>")

	// host -> guest.
	writeFile(t, filepath.Join(e.host, "a.txt"), "host again")
	mustRemove(t, filepath.Join(e.host, "new", "c.txt"))
	e.flush()
	wantFile(t, filepath.Join(e.guest, "a.txt"), "host again")
	wantFile(t, filepath.Join(e.guest, "new", "c.txt"), "<missing>")

	e.flush() // counts come from the last cycle's scan, before its changes
	st := e.status()
	if st.State != "watching" || !st.Connected || st.LastSync.IsZero() || st.LastFlush.IsZero() {
		t.Errorf("status after flush: %+v", st)
	}
	if st.HostFiles != 1 || st.GuestFiles != 1 {
		t.Errorf("files host=%d guest=%d, want 1 each", st.HostFiles, st.GuestFiles)
	}
}

func TestModesAndOwner(t *testing.T) {
	e := newEnv(t)
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 4321, 8765 // root can hand files to any user
	}
	writeFile(t, filepath.Join(e.host, "plain.txt"), "x") // 0600 on the host
	writeFile(t, filepath.Join(e.host, "sub", "run.sh"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(e.host, "sub", "run.sh"), 0o700); err != nil {
		t.Fatal(err)
	}
	m := e.mount()
	m.UID, m.GID = uid, gid
	e.ensure(m)

	wantMode(t, filepath.Join(e.guest, "plain.txt"), 0o644)
	wantMode(t, filepath.Join(e.guest, "sub"), 0o755|fs.ModeDir)
	wantMode(t, filepath.Join(e.guest, "sub", "run.sh"), 0o755)
	for _, p := range []string{"plain.txt", "sub", "sub/run.sh"} {
		wantOwner(t, filepath.Join(e.guest, p), uid, gid)
	}

	// Files a container creates reach the host as the host user (the agent
	// runs as that user) with the default modes.
	writeFile(t, filepath.Join(e.guest, "out", "gen.txt"), "y")
	e.flush()
	wantMode(t, filepath.Join(e.host, "out", "gen.txt"), 0o644)
	wantMode(t, filepath.Join(e.host, "out"), 0o755|fs.ModeDir)
	wantOwner(t, filepath.Join(e.host, "out", "gen.txt"), os.Getuid(), os.Getgid())
}

func TestIgnores(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.host, "node_modules", "dep.js"), "host dep")
	writeFile(t, filepath.Join(e.host, "lib", "node_modules", "x.js"), "nested")
	writeFile(t, filepath.Join(e.host, "app.js"), "app")
	m := e.mount()
	m.Ignores = AnchoredIgnores([]string{"node_modules/", "/cache"})
	e.ensure(m)
	wantFile(t, filepath.Join(e.guest, "app.js"), "app")
	wantFile(t, filepath.Join(e.guest, "node_modules", "dep.js"), "<missing>")
	// Anchored: only the top-level node_modules is excluded.
	wantFile(t, filepath.Join(e.guest, "lib", "node_modules", "x.js"), "nested")

	writeFile(t, filepath.Join(e.guest, "node_modules", "guest.js"), "guest dep")
	writeFile(t, filepath.Join(e.guest, "cache", "c"), "guest cache")
	writeFile(t, filepath.Join(e.guest, "app2.js"), "app2")
	e.flush()
	wantFile(t, filepath.Join(e.host, "app2.js"), "app2")
	wantFile(t, filepath.Join(e.host, "node_modules", "guest.js"), "<missing>")
	wantFile(t, filepath.Join(e.host, "cache", "c"), "<missing>")
	wantFile(t, filepath.Join(e.host, "node_modules", "dep.js"), "host dep")
	wantFile(t, filepath.Join(e.guest, "node_modules", "guest.js"), "guest dep")
}

func TestAnchoredIgnores(t *testing.T) {
	got := strings.Join(AnchoredIgnores([]string{"node_modules", "/vendor/", "web/cache", ""}), " ")
	if want := "/node_modules /vendor /web/cache"; got != want {
		t.Errorf("AnchoredIgnores = %q, want %q", got, want)
	}
}

func TestConflictKeepsBothSides(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.host, "same.txt"), "base")
	writeFile(t, filepath.Join(e.host, "other.txt"), "o")
	e.ensure(e.mount())
	wantFile(t, filepath.Join(e.guest, "same.txt"), "base")

	// Both sides edit the same file before the next cycle.
	writeFile(t, filepath.Join(e.host, "same.txt"), "host version")
	writeFile(t, filepath.Join(e.guest, "same.txt"), "guest version")
	e.flush()
	wantFile(t, filepath.Join(e.host, "same.txt"), "host version")
	wantFile(t, filepath.Join(e.guest, "same.txt"), "guest version")
	st := e.status()
	if len(st.Conflicts) != 1 || st.Conflicts[0].Path != "same.txt" ||
		st.Conflicts[0].Host != "modified" || st.Conflicts[0].Guest != "modified" {
		t.Fatalf("conflicts = %+v, want same.txt modified on both sides", st.Conflicts)
	}

	// Other paths keep syncing while the conflict stands.
	writeFile(t, filepath.Join(e.guest, "other.txt"), "still syncing")
	e.flush()
	wantFile(t, filepath.Join(e.host, "other.txt"), "still syncing")

	// The user resolves it by making one side match; the conflict clears.
	writeFile(t, filepath.Join(e.guest, "same.txt"), "host version")
	e.flush()
	if st := e.status(); len(st.Conflicts) != 0 {
		t.Errorf("conflicts after resolving: %+v", st.Conflicts)
	}
	writeFile(t, filepath.Join(e.guest, "same.txt"), "after")
	e.flush()
	wantFile(t, filepath.Join(e.host, "same.txt"), "after")
}

func TestManagerRestartKeepsSession(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.host, "keep.txt"), "k")
	writeFile(t, filepath.Join(e.host, "gone.txt"), "g")
	e.ensure(e.mount())
	before := e.status().Session
	e.close()

	// While the agent is down, the host deletes a file. Only the saved sync
	// history tells Mutagen that this is a deletion, not a guest-only file
	// to copy back.
	mustRemove(t, filepath.Join(e.host, "gone.txt"))
	e.open()
	st := e.status() // loaded from disk before any Ensure
	if st.Session != before {
		t.Fatalf("session after restart = %s, want %s", st.Session, before)
	}
	e.ensure(e.mount())
	if got := e.status().Session; got != before {
		t.Fatalf("Ensure re-created the session: %s, want %s", got, before)
	}
	e.flush()
	wantFile(t, filepath.Join(e.guest, "gone.txt"), "<missing>")
	wantFile(t, filepath.Join(e.host, "gone.txt"), "<missing>")
	wantFile(t, filepath.Join(e.guest, "keep.txt"), "k")
}

func TestEnsureRecreatesOnChangedSettings(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.host, "a"), "a")
	e.ensure(e.mount())
	first := e.status().Session
	m := e.mount()
	m.Ignores = []string{"/tmp"}
	e.ensure(m)
	if got := e.status().Session; got == first {
		t.Fatalf("session %s kept after the ignores changed", got)
	}
	e.ensure(m)
	second := e.status().Session
	e.ensure(m)
	if got := e.status().Session; got != second {
		t.Fatalf("same settings re-created the session: %s -> %s", second, got)
	}
	ctx := context.Background()
	if err := e.m.Prune(ctx, []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Prune(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.m.Status(); len(st) != 0 {
		t.Fatalf("after prune: %+v", st)
	}
	wantFile(t, filepath.Join(e.host, "a"), "a")
}

// The guest copy is lost the way a new data disk or `delete --data` loses
// it: all at once, while the session is not looking (paused) or by one
// atomic swap. An rm -rf while the session runs is a sequence of ordinary
// deletions and is synced as such.
func TestGuestCopyLostIsRefilledFromHost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		paused bool
		lose   func(t *testing.T, dir string)
	}{
		{"emptied while stopped", true, emptyDir},   // Mutagen: HaltedOnRootEmptied
		{"deleted while stopped", true, mustRemove}, // HaltedOnRootDeletion
		{"swapped while running", false, swapForEmpty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			files := map[string]string{"a.txt": "a", "b/c.txt": "c", "b/d/e.txt": "e"}
			for p, c := range files {
				writeFile(t, filepath.Join(e.host, p), c)
			}
			e.ensure(e.mount())
			ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
			defer cancel()
			if tc.paused {
				if err := e.m.PauseAll(ctx); err != nil {
					t.Fatal(err)
				}
			}
			tc.lose(t, e.guest)
			if tc.paused {
				if err := e.m.ResumeAll(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// The flush runs into Mutagen's safety halt; the Manager resets
			// the session on its own, and the flush then succeeds.
			e.flush()
			eventually(t, "guest refilled", func() bool {
				return readFile(t, filepath.Join(e.guest, "b", "d", "e.txt")) == "e"
			})
			for p, c := range files {
				wantFile(t, filepath.Join(e.host, p), c)
				wantFile(t, filepath.Join(e.guest, p), c)
			}
			st := e.status()
			if st.Refills < 1 || st.State != "watching" {
				t.Errorf("status after refill: %+v", st)
			}
			// Deletions sync normally again afterwards.
			mustRemove(t, filepath.Join(e.guest, "a.txt"))
			e.flush()
			wantFile(t, filepath.Join(e.host, "a.txt"), "<missing>")
		})
	}
}

// swapForEmpty replaces dir with an empty folder in one rename.
func swapForEmpty(t *testing.T, dir string) {
	t.Helper()
	empty := dir + ".new"
	mustMkdir(t, empty)
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(empty, dir); err != nil {
		t.Fatal(err)
	}
}

// A new data disk: the guest copy and the guest's Mutagen data are gone.
// Mutagen's emptied-root guard does not cover a root that held one entry,
// nor a copy a container already wrote into; the preamble must.
func TestNewDataDiskKeepsHostFiles(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.host, "only.txt"), "precious")
	e.ensure(e.mount())
	e.close()
	e.newGuestDisk()
	created, err := PrepareGuestCopy(e.guest, -1, -1)
	if err != nil || !created {
		t.Fatalf("PrepareGuestCopy = %v, %v; want created", created, err)
	}
	wantMode(t, e.guest, 0o755|fs.ModeDir)
	writeFile(t, filepath.Join(e.guest, "container.txt"), "early write")
	e.open()
	e.ensure(e.mount())
	e.flush()
	wantFile(t, filepath.Join(e.host, "only.txt"), "precious")
	wantFile(t, filepath.Join(e.guest, "only.txt"), "precious")
	wantFile(t, filepath.Join(e.host, "container.txt"), "early write")
	if st := e.status(); st.Refills != 1 {
		t.Errorf("refills = %d, want 1", st.Refills)
	}
	if again, err := PrepareGuestCopy(e.guest, -1, -1); err != nil || again {
		t.Errorf("PrepareGuestCopy on an existing copy = %v, %v", again, err)
	}
	// Known guest from now on: a deletion is a deletion again.
	mustRemove(t, filepath.Join(e.guest, "only.txt"))
	e.flush()
	wantFile(t, filepath.Join(e.host, "only.txt"), "<missing>")
}

func TestHostEmptiedStaysHalted(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"a", "b", "c"} {
		writeFile(t, filepath.Join(e.host, p), p)
	}
	e.ensure(e.mount())
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := e.m.PauseAll(ctx); err != nil {
		t.Fatal(err)
	}
	emptyDir(t, e.host)
	if err := e.m.ResumeAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Flush(ctx, "m1"); err == nil {
		t.Fatal("flush succeeded although the host folder was emptied")
	}
	if st := e.status(); st.State != "halted-on-root-emptied" {
		t.Fatalf("state = %s, want halted-on-root-emptied", st.State)
	}
	wantFile(t, filepath.Join(e.guest, "a"), "a") // the only full copy
	if err := e.m.WaitInitial(ctx, nil); err == nil || !strings.Contains(err.Error(), "halted") {
		t.Errorf("WaitInitial on a halted mount = %v, want a halted error", err)
	}
	// The user restores the host copy from the guest with a reset.
	if err := e.m.Reset(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	e.flush()
	wantFile(t, filepath.Join(e.host, "a"), "a")
}

func TestWaitInitialReportsProgress(t *testing.T) {
	e := newEnv(t)
	const n = 300
	for i := range n {
		writeFile(t, filepath.Join(e.host, "d", strings.Repeat("x", i%7+1)+"-"+itoa(i)), strings.Repeat("z", 1000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := e.m.Ensure(ctx, e.mount()); err != nil {
		t.Fatal(err)
	}
	var last Progress
	calls := 0
	if err := e.m.WaitInitial(ctx, func(p Progress) { last = p; calls++ }); err != nil {
		t.Fatal(err)
	}
	if calls < 2 || last.Mounts != 1 || last.Done != 1 {
		t.Errorf("progress calls=%d last=%+v", calls, last)
	}
	entries, err := os.ReadDir(filepath.Join(e.guest, "d"))
	if err != nil || len(entries) != n {
		t.Fatalf("guest has %d files (%v), want %d", len(entries), err, n)
	}
}

func TestReconnectAfterLinkLoss(t *testing.T) {
	e := newEnv(t)
	e.ensure(e.mount())
	e.g.breakLink()
	e.g.connect()
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	start := time.Now()
	if err := e.m.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.guest, "after.txt"), "ok")
	e.flush()
	wantFile(t, filepath.Join(e.host, "after.txt"), "ok")
	// Without Reconnect, Mutagen would wait its fixed 15 s.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("reconnect took %v", d)
	}
}

func TestPauseResume(t *testing.T) {
	e := newEnv(t)
	e.ensure(e.mount())
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := e.m.PauseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if st := e.status(); st.State != "paused" || !st.Paused {
		t.Fatalf("state = %s, want paused", st.State)
	}
	if err := e.m.Flush(ctx, "m1"); err == nil {
		t.Fatal("flush of a paused session succeeded")
	}
	writeFile(t, filepath.Join(e.host, "p.txt"), "p")
	if err := e.m.ResumeAll(ctx); err != nil {
		t.Fatal(err)
	}
	e.flush()
	wantFile(t, filepath.Join(e.guest, "p.txt"), "p")
}

func TestOnlyOneManagerAndDataDir(t *testing.T) {
	e := newEnv(t)
	other := filepath.Join(t.TempDir(), "other")
	if _, err := NewManager(Options{DataDir: other, Dial: e.g.dial}); !errors.Is(err, ErrDataDirInUse) {
		t.Errorf("second Manager with another data dir: %v, want ErrDataDirInUse", err)
	}
	if _, err := NewManager(Options{DataDir: e.dataDir, Dial: e.g.dial}); err == nil {
		t.Error("second Manager in one process succeeded")
	}
	if got := os.Getenv(dataDirEnv); got != e.dataDir {
		t.Errorf("%s = %q, want %q", dataDirEnv, got, e.dataDir)
	}
	if err := Serve(context.Background(), nopConn(t), GuestOptions{DataDir: other}); !errors.Is(err, ErrDataDirInUse) {
		t.Errorf("Serve with another data dir: %v", err)
	}
	if _, err := NewManager(Options{DataDir: "relative", Dial: e.g.dial}); err == nil {
		t.Error("relative data dir accepted")
	}
}

func TestEnsureRejectsBadMounts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for name, m := range map[string]Mount{
		"id":         {ID: "Bad_ID", HostPath: e.host, GuestPath: e.guest},
		"host rel":   {ID: "a", HostPath: "rel", GuestPath: e.guest},
		"host gone":  {ID: "a", HostPath: filepath.Join(e.host, "nope"), GuestPath: e.guest},
		"guest root": {ID: "a", HostPath: e.host, GuestPath: "/"},
		"exec mode":  {ID: "a", HostPath: e.host, GuestPath: e.guest, FileMode: 0o755},
		"ignore":     {ID: "a", HostPath: e.host, GuestPath: e.guest, Ignores: []string{"!"}},
	} {
		if err := e.m.Ensure(ctx, m); err == nil {
			t.Errorf("%s: Ensure accepted %+v", name, m)
		}
	}
}

func wantMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode() & (fs.ModePerm | fs.ModeDir); got != want {
		t.Errorf("mode of %s = %v, want %v", path, got, want)
	}
}

func wantOwner(t *testing.T, path string, uid, gid int) {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	if int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("owner of %s = %d:%d, want %d:%d", path, st.Uid, st.Gid, uid, gid)
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		mustRemove(t, filepath.Join(dir, en.Name()))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func nopConn(t *testing.T) net.Conn {
	a, b := net.Pipe()
	t.Cleanup(func() { b.Close() })
	return a
}

// Saved sessions are validated on load; a URL in an unknown protocol slot
// would make the manager drop the session.
func TestGuestURLPassesValidation(t *testing.T) {
	m := Mount{ID: "x", HostPath: "/h", GuestPath: "/var/lib/vmdock/sync/x"}
	if err := m.betaURL().EnsureValid(); err != nil {
		t.Fatalf("guest URL invalid: %v", err)
	}
	if err := m.alphaURL().EnsureValid(); err != nil {
		t.Fatalf("host URL invalid: %v", err)
	}
	u := m.betaURL()
	u.Protocol = 7 // an unregistered slot
	if u.EnsureValid() == nil {
		t.Fatal("an unknown protocol slot validated; the ssh-slot reasoning is stale")
	}
}

// With both sides watched by the caller, Mutagen must not poll: a change
// waits for a Flush (the watcher's report) or the backstop rescan.
func TestWatchedSidesSyncOnFlushAndBackstop(t *testing.T) {
	e := newEnv(t)
	e.close()
	e.openWith(Options{PollInterval: time.Second, HostWatched: true, GuestWatched: true, Backstop: time.Hour})
	writeFile(t, filepath.Join(e.host, "a.txt"), "first")
	e.ensure(e.mount())
	wantFile(t, filepath.Join(e.guest, "a.txt"), "first")

	writeFile(t, filepath.Join(e.host, "a.txt"), "host edit")
	writeFile(t, filepath.Join(e.guest, "b.txt"), "guest new")
	// Three poll periods: a polling side would have synced by now.
	time.Sleep(3 * time.Second)
	wantFile(t, filepath.Join(e.guest, "a.txt"), "first")
	wantFile(t, filepath.Join(e.host, "b.txt"), "<missing>")
	e.flush()
	wantFile(t, filepath.Join(e.guest, "a.txt"), "host edit")
	wantFile(t, filepath.Join(e.host, "b.txt"), "guest new")

	// The backstop alone finds a change nobody reported.
	e.m.SetBackstop(300 * time.Millisecond)
	writeFile(t, filepath.Join(e.guest, "c.txt"), "unreported")
	eventually(t, "the backstop rescan to sync c.txt", func() bool {
		return readFile(t, filepath.Join(e.host, "c.txt")) == "unreported"
	})
}

// The backstop rescans only a session that ran no cycle for a whole
// period: while flushes keep it synced, a rescan would only scan again.
func TestBackstopSkipsASessionThatJustSynced(t *testing.T) {
	e := newEnv(t)
	e.close()
	e.openWith(Options{HostWatched: true, GuestWatched: true, Backstop: time.Hour})
	e.ensure(e.mount())
	e.m.SetBackstop(time.Second)
	before := e.status().SuccessfulCycles
	flushes := 0
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); flushes++ {
		e.flush()
		time.Sleep(300 * time.Millisecond)
	}
	// The monitor counts a cycle when the engine reports it.
	eventually(t, "the flushes' cycles counted", func() bool { return e.status().SuccessfulCycles >= before+uint64(flushes) })
	if got := e.status().SuccessfulCycles - before; got != uint64(flushes) {
		t.Fatalf("%d cycles for %d flushes: the backstop rescanned a session that had just synced", got, flushes)
	}
	// Left alone, the session is rescanned again.
	eventually(t, "a backstop cycle once the flushes stop", func() bool { return e.status().SuccessfulCycles > before+uint64(flushes) })
}

// In manual mode Mutagen runs no cycle on connecting; the Manager does, so
// a change made while the link was down arrives without a watcher report.
func TestWatchedSidesSyncOnReconnect(t *testing.T) {
	e := newEnv(t)
	e.close()
	e.openWith(Options{HostWatched: true, GuestWatched: true, Backstop: time.Hour})
	e.ensure(e.mount())
	e.g.breakLink()
	writeFile(t, filepath.Join(e.host, "offline.txt"), "made while down")
	e.g.connect()
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := e.m.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "offline.txt in the guest after reconnecting", func() bool {
		return readFile(t, filepath.Join(e.guest, "offline.txt")) == "made while down"
	})
}

func TestBackstopWaitGrowsWithTheRescan(t *testing.T) {
	for _, tc := range []struct{ every, took, want time.Duration }{
		{10 * time.Second, 0, 10 * time.Second},                       // nothing rescanned
		{10 * time.Second, 200 * time.Millisecond, 10 * time.Second},  // a small tree: the period
		{10 * time.Second, 1300 * time.Millisecond, 26 * time.Second}, // 20,000 files under TCG
		{2 * time.Second, 50 * time.Millisecond, 2 * time.Second},
	} {
		if got := backstopWait(tc.every, tc.took); got != tc.want {
			t.Errorf("backstopWait(%s, %s) = %s, want %s", tc.every, tc.took, got, tc.want)
		}
	}
}

// A host-to-guest session carries the host's edits into the guest copy
// and none of the guest's back: what a sandbox's agent writes stays in the
// guest, and a host edit of a file the guest changed leaves the guest's
// version in place.
func TestHostToGuestKeepsGuestEditsInTheGuest(t *testing.T) {
	e := newEnv(t)
	writeFile(t, filepath.Join(e.host, "a.txt"), "host a")
	writeFile(t, filepath.Join(e.host, "b.txt"), "host b")
	m := e.mount()
	m.HostToGuest = true
	e.ensure(m)
	wantFile(t, filepath.Join(e.guest, "a.txt"), "host a")

	writeFile(t, filepath.Join(e.guest, "a.txt"), "guest edit")
	writeFile(t, filepath.Join(e.guest, "new.txt"), "guest new")
	mustRemove(t, filepath.Join(e.guest, "b.txt"))
	writeFile(t, filepath.Join(e.host, "c.txt"), "host c")
	e.flush()
	wantFile(t, filepath.Join(e.host, "a.txt"), "host a")
	wantFile(t, filepath.Join(e.host, "new.txt"), "<missing>")
	wantFile(t, filepath.Join(e.host, "b.txt"), "host b")
	wantFile(t, filepath.Join(e.guest, "c.txt"), "host c")
	wantFile(t, filepath.Join(e.guest, "a.txt"), "guest edit")
	wantFile(t, filepath.Join(e.guest, "new.txt"), "guest new")

	writeFile(t, filepath.Join(e.host, "a.txt"), "host again")
	e.flush()
	wantFile(t, filepath.Join(e.guest, "a.txt"), "guest edit")
}
