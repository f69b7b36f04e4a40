package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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
