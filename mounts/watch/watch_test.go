package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func mkTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"src/a", "node_modules/x"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func expect(t *testing.T, w *Watcher, want string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case id := <-w.Changes():
		if id != want {
			t.Fatalf("change in %q, want %q", id, want)
		}
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("no change reported for %q within %s", want, within)
	}
	return 0
}

func expectNone(t *testing.T, w *Watcher, within time.Duration) {
	t.Helper()
	select {
	case id := <-w.Changes():
		t.Fatalf("unexpected change in %q", id)
	case <-time.After(within):
	}
}

// A write deep in a tree is reported once, as its tree, soon after it;
// a burst of writes is one report.
func TestReportsTreeOnceAfterABurst(t *testing.T) {
	a, b := mkTree(t), mkTree(t)
	w, err := New([]Tree{{ID: "a", Dir: a}, {ID: "b", Dir: b}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < 50; i++ {
		os.WriteFile(filepath.Join(b, "src/a", "f"+string(rune('a'+i%26))), []byte("x"), 0o644)
	}
	if d := expect(t, w, "b", 2*time.Second); d > time.Second {
		t.Fatalf("reported after %s", d)
	}
	expectNone(t, w, 300*time.Millisecond)
}

// Folders made after the start are watched too, and changes in excluded
// subfolders are not reported at all.
func TestNewFoldersWatchedExcludesIgnored(t *testing.T) {
	dir := mkTree(t)
	w, err := New([]Tree{{ID: "t", Dir: dir, Exclude: []string{"node_modules"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.WriteFile(filepath.Join(dir, "node_modules/x/dep.js"), []byte("x"), 0o644)
	expectNone(t, w, 300*time.Millisecond)
	if err := os.MkdirAll(filepath.Join(dir, "new/deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "t", 2*time.Second) // the mkdir itself
	os.WriteFile(filepath.Join(dir, "new/deeper/file.php"), []byte("<?php"), 0o644)
	expect(t, w, "t", 2*time.Second)
}

// Past the cap the rest is unwatched and Capped says so.
func TestCap(t *testing.T) {
	dir := mkTree(t)
	w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{MaxWatches: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !w.Capped() || w.Watches() != 2 {
		t.Fatalf("capped %v, watches %d; want true, 2", w.Capped(), w.Watches())
	}
}

// OnPath sees each content change with its path, and nothing for an
// attribute-only change (a touch from the guest must not echo back).
func TestOnPathSkipsAttributeChanges(t *testing.T) {
	dir := mkTree(t)
	f := filepath.Join(dir, "src/a/x.txt")
	os.WriteFile(f, []byte("1"), 0o644)
	var mu sync.Mutex
	var seen []string
	w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{OnPath: func(id, p string, op Op) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %d", id, filepath.Base(p), op))
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	now := time.Now()
	os.Chtimes(f, now, now)
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	if len(seen) != 0 {
		t.Fatalf("attribute change reported: %v", seen)
	}
	mu.Unlock()
	os.WriteFile(f, []byte("2"), 0o644)
	os.WriteFile(filepath.Join(dir, "src/a/new.txt"), nil, 0o644)
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(seen, ",")
	if !strings.Contains(joined, "t x.txt 0") || !strings.Contains(joined, "t new.txt 1") {
		t.Fatalf("seen %v; want a change of x.txt and a listing change for new.txt", seen)
	}
}

// A tree is due Quiet after its last change, or MaxDelay after its first
// in a burst that never goes quiet; nothing pending means no timer at all.
func TestPendingDueTimes(t *testing.T) {
	p := newPending(2, 50*time.Millisecond, 500*time.Millisecond)
	t0 := time.Now()
	never := func(int) bool { t.Fatal("sent with nothing due"); return false }
	if next := p.flush(t0, never); next != 0 {
		t.Fatalf("idle: next %s, want 0 (no wake-up)", next)
	}
	p.mark(1, t0)
	if next := p.flush(t0.Add(10*time.Millisecond), never); next != 40*time.Millisecond {
		t.Fatalf("next %s, want 40ms", next)
	}
	for at := 40 * time.Millisecond; at < 500*time.Millisecond; at += 40 * time.Millisecond {
		p.mark(1, t0.Add(at)) // never quiet for 50 ms
	}
	var sent []int
	send := func(i int) bool { sent = append(sent, i); return true }
	if next := p.flush(t0.Add(499*time.Millisecond), send); next != time.Millisecond || len(sent) != 0 {
		t.Fatalf("before MaxDelay: next %s, sent %v", next, sent)
	}
	if next := p.flush(t0.Add(500*time.Millisecond), send); next != 0 || len(sent) != 1 || sent[0] != 1 {
		t.Fatalf("at MaxDelay: next %s, sent %v; want tree 1 sent, nothing pending", next, sent)
	}
}

// A report the reader cannot take yet stays pending and is retried.
func TestPendingRetriesABusyReader(t *testing.T) {
	p := newPending(1, 50*time.Millisecond, 500*time.Millisecond)
	t0 := time.Now()
	p.mark(0, t0)
	busy := func(int) bool { return false }
	if next := p.flush(t0.Add(time.Second), busy); next != 25*time.Millisecond {
		t.Fatalf("busy reader: next %s, want a retry in 25ms", next)
	}
	ok := false
	if next := p.flush(t0.Add(time.Second), func(int) bool { ok = true; return true }); !ok || next != 0 {
		t.Fatalf("retry: sent %v, next %s", ok, next)
	}
}

// Close ends the watcher's goroutine whether it is idle or waiting for a
// report to come due, and a second Close is a no-op.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, pendingReport := range []bool{false, true} {
		dir := mkTree(t)
		w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{Quiet: time.Hour, MaxDelay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if pendingReport {
			os.WriteFile(filepath.Join(dir, "src/a/f"), []byte("x"), 0o644)
			time.Sleep(50 * time.Millisecond)
		}
		done := make(chan error, 1)
		go func() { done <- w.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("close: %v", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("Close hangs (pending report %v)", pendingReport)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
		if _, ok := <-w.Changes(); ok {
			t.Fatal("Changes still open after Close")
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

// A folder's relative path is the tail of its path, not a second copy.
func TestRelToSharesThePathsBytes(t *testing.T) {
	p := strings.Clone("/home/dev/src/app/node_modules/left-pad")
	rel, ok := relTo("/home/dev/src", p)
	if !ok || rel != "app/node_modules/left-pad" {
		t.Fatalf("relTo = %q, %v", rel, ok)
	}
	if unsafe.StringData(rel) != unsafe.StringData(p[len("/home/dev/src/"):]) {
		t.Error("rel is a copy of the path's tail")
	}
	for _, c := range []struct{ dir, p, want string }{
		{"/home/dev/src", "/home/dev/src", "."},
		{"/home/dev/src", "/home/dev/srcx/a", ""},
		{"/home/dev/src", "/home/dev/other", ""},
		{"/", "/etc/hosts", "etc/hosts"},
	} {
		got, ok := relTo(c.dir, c.p)
		if (c.want == "") == ok || (ok && got != c.want) {
			t.Errorf("relTo(%q, %q) = %q, %v; want %q", c.dir, c.p, got, ok, c.want)
		}
	}
}
