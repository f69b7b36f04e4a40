//go:build linux

package watch

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// watchedPaths lists the folders watched; only while run is not going
// (newIdle) or has ended (Close).
func (w *Watcher) watchedPaths() []string {
	var out []string
	for _, d := range w.b.dirs {
		out = append(out, d.path)
	}
	slices.Sort(out)
	return out
}

// newIdle is a Watcher with its trees watched but no run loop: the test
// feeds events itself.
func newIdle(t *testing.T, trees []Tree, opts Options) *Watcher {
	t.Helper()
	w := &Watcher{opts: opts, trees: trees, changes: make(chan string, len(trees)+1)}
	if w.opts.MaxWatches == 0 {
		w.opts.MaxWatches = 65536
	}
	if w.opts.Logger == nil {
		w.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := w.b.open(trees); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.b.free() })
	for i, tr := range trees {
		w.addTree(i, tr.Dir)
	}
	return w
}

// rawEvent is one inotify event as the kernel lays it out.
func rawEvent(wd int32, mask uint32, name string) []byte {
	n := 0
	if name != "" {
		n = (len(name) + 16) &^ 15 // NUL-padded, as the kernel does
	}
	b := make([]byte, unix.SizeofInotifyEvent+n)
	binary.NativeEndian.PutUint32(b[0:], uint32(wd))
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[12:], uint32(n))
	copy(b[unix.SizeofInotifyEvent:], name)
	return b
}

// A file open for writing is reported when its writer closes it, not per
// write: IN_MODIFY is not asked for.
func TestCloseWriteReports(t *testing.T) {
	dir := mkTree(t)
	w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	f, err := os.OpenFile(filepath.Join(dir, "src/a/x.log"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, w, "t", 2*time.Second) // the create
	for i := 0; i < 20; i++ {
		f.Write([]byte("line\n"))
	}
	expectNone(t, w, 300*time.Millisecond)
	f.Close()
	expect(t, w, "t", 2*time.Second)
}

// A folder tree made at once (mkdir -p, an unpacked archive) is watched
// to the bottom, even the levels made before the watch on their parent:
// a file created at the bottom later is reported.
func TestNewNestedFoldersAllWatched(t *testing.T) {
	dir := mkTree(t)
	w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before := w.Watches()
	if err := os.MkdirAll(filepath.Join(dir, "n1/n2/n3/n4"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "t", 2*time.Second)
	if got := w.Watches(); got != before+4 {
		t.Fatalf("watches %d after mkdir -p of 4 levels, want %d", got, before+4)
	}
	os.WriteFile(filepath.Join(dir, "n1/n2/n3/n4/f.go"), nil, 0o644)
	expect(t, w, "t", 2*time.Second)
}

// Making, renaming or removing an excluded folder itself is not the
// tree's change either, nor is anything under a nested exclude.
func TestExcludedFolderItselfIgnored(t *testing.T) {
	dir := mkTree(t)
	w, err := New([]Tree{{ID: "t", Dir: dir, Exclude: []string{"vendor", "src/gen"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.MkdirAll(filepath.Join(dir, "vendor/pkg"), 0o755)
	os.MkdirAll(filepath.Join(dir, "src/gen/x"), 0o755)
	os.WriteFile(filepath.Join(dir, "src/gen/x/out.go"), nil, 0o644)
	os.RemoveAll(filepath.Join(dir, "vendor"))
	expectNone(t, w, 300*time.Millisecond)
	w.Close() // run is done with the watch map
	for _, p := range w.watchedPaths() {
		if rel, _ := filepath.Rel(dir, p); rel == "vendor" || rel == "src/gen" || filepath.Dir(rel) == "src/gen" {
			t.Fatalf("excluded folder %s is watched", rel)
		}
	}
}

// A removed folder's watch is forgotten (IN_IGNORED), so the count goes
// back down.
func TestRemovedFolderForgotten(t *testing.T) {
	dir := mkTree(t)
	w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before := w.Watches()
	os.MkdirAll(filepath.Join(dir, "tmp/a/b"), 0o755)
	expect(t, w, "t", 2*time.Second)
	os.RemoveAll(filepath.Join(dir, "tmp"))
	expect(t, w, "t", 2*time.Second)
	if got := w.Watches(); got != before {
		t.Fatalf("watches %d after removing the new folders, want %d", got, before)
	}
}

// A folder renamed inside its tree keeps being watched under its new
// path (OnPath names the new path); one moved out of the tree is
// unwatched with everything below it and reports nothing more.
func TestRenamedFolders(t *testing.T) {
	dir, outside := mkTree(t), t.TempDir()
	var mu sync.Mutex
	var paths []string
	w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{OnPath: func(_, p string, _ Op) {
		mu.Lock()
		paths = append(paths, p)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before := w.Watches()
	os.MkdirAll(filepath.Join(dir, "old/sub"), 0o755)
	expect(t, w, "t", 2*time.Second)
	if err := os.Rename(filepath.Join(dir, "old"), filepath.Join(dir, "new")); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "t", 2*time.Second)
	mu.Lock()
	paths = nil
	mu.Unlock()
	want := filepath.Join(dir, "new/sub/f.txt")
	os.WriteFile(want, nil, 0o644)
	expect(t, w, "t", 2*time.Second)
	mu.Lock()
	if !slices.Contains(paths, want) {
		t.Fatalf("OnPath saw %v, want %s", paths, want)
	}
	mu.Unlock()
	if err := os.Rename(filepath.Join(dir, "new"), filepath.Join(outside, "gone")); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "t", 2*time.Second)
	os.WriteFile(filepath.Join(outside, "gone/sub/g.txt"), nil, 0o644)
	expectNone(t, w, 300*time.Millisecond)
	if got := w.Watches(); got != before {
		t.Fatalf("watches %d after the move out, want %d", got, before)
	}
}

// Past the cap, new folders are not watched either.
func TestCapHoldsForNewFolders(t *testing.T) {
	dir := mkTree(t)
	w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{MaxWatches: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.MkdirAll(filepath.Join(dir, "a/b/c/d/e"), 0o755)
	expect(t, w, "t", 2*time.Second)
	if !w.Capped() || w.Watches() != 5 {
		t.Fatalf("capped %v, watches %d; want true, 5", w.Capped(), w.Watches())
	}
}

// A queue overflow lost events: every tree is reported, and folders made
// meanwhile (whose IN_CREATE may be among the lost) get their watches.
func TestOverflowReportsAllAndRewalks(t *testing.T) {
	a, b := mkTree(t), mkTree(t)
	w := newIdle(t, []Tree{{ID: "a", Dir: a}, {ID: "b", Dir: b}}, Options{})
	before := w.Watches()
	if err := os.MkdirAll(filepath.Join(b, "lost/deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := newPending(2, 50*time.Millisecond, 500*time.Millisecond)
	now := time.Now()
	w.events(rawEvent(-1, unix.IN_Q_OVERFLOW, ""), now, p)
	if got := w.Watches(); got != before+2 {
		t.Fatalf("watches %d after the overflow, want %d (the new folders)", got, before+2)
	}
	if !slices.Contains(w.watchedPaths(), filepath.Join(b, "lost/deep")) {
		t.Fatalf("watched %v; want the new folders", w.watchedPaths())
	}
	var sent []int
	p.flush(now.Add(time.Second), func(i int) bool { sent = append(sent, i); return true })
	if !slices.Equal(sent, []int{0, 1}) {
		t.Fatalf("reported trees %v after an overflow, want both", sent)
	}
}

// Events are decoded from a buffer of many (the names NUL-padded), and a
// late event of a forgotten watch is dropped.
func TestEventsDecodeABuffer(t *testing.T) {
	dir := mkTree(t)
	var seen []string
	w := newIdle(t, []Tree{{ID: "t", Dir: dir}}, Options{OnPath: func(_, p string, op Op) {
		rel, _ := filepath.Rel(dir, p)
		seen = append(seen, rel+map[Op]string{Changed: " changed", Listing: " listing"}[op])
	}})
	root := w.watchOf(t, dir)
	var buf []byte
	buf = append(buf, rawEvent(root, unix.IN_CREATE, "a.txt")...)
	buf = append(buf, rawEvent(root, unix.IN_CLOSE_WRITE, "a.txt")...)
	buf = append(buf, rawEvent(root, unix.IN_ATTRIB, "a.txt")...)
	buf = append(buf, rawEvent(root+1000, unix.IN_CREATE, "ghost")...)
	buf = append(buf, rawEvent(root, unix.IN_MOVED_FROM, "a-long-name-past-one-pad.txt")...)
	p := newPending(1, 50*time.Millisecond, 500*time.Millisecond)
	w.events(buf, time.Now(), p)
	want := []string{"a.txt listing", "a.txt changed", "a-long-name-past-one-pad.txt listing"}
	if !slices.Equal(seen, want) {
		t.Fatalf("OnPath saw %q, want %q", seen, want)
	}
	if p.n != 1 {
		t.Fatalf("pending trees %d, want 1", p.n)
	}
}

// A new folder that already holds subfolders when its event is handled
// gets them all watched, whether the file system counts subfolders in the
// link count (then an empty one is not read) or not (then it is walked).
func TestNewFolderWithSubfolders(t *testing.T) {
	for _, counted := range []bool{true, false} {
		dir := mkTree(t)
		w := newIdle(t, []Tree{{ID: "t", Dir: dir}}, Options{})
		w.b.counted[0] = counted
		root := w.watchOf(t, dir)
		os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755)
		os.MkdirAll(filepath.Join(dir, "e"), 0o755)
		p := newPending(1, 50*time.Millisecond, 500*time.Millisecond)
		w.events(append(rawEvent(root, unix.IN_CREATE|unix.IN_ISDIR, "a"), rawEvent(root, unix.IN_CREATE|unix.IN_ISDIR, "e")...), time.Now(), p)
		got := w.watchedPaths()
		for _, want := range []string{"a", "a/b", "a/b/c", "e"} {
			if !slices.Contains(got, filepath.Join(dir, want)) {
				t.Fatalf("counted %v: %s not watched; watched %v", counted, want, got)
			}
		}
		if d := w.b.dirs[w.watchOf(t, filepath.Join(dir, "a/b/c"))]; d.rel != "a/b/c" {
			t.Fatalf("rel %q, want a/b/c", d.rel)
		}
	}
}

// Close returns while the watcher is in the middle of a burst.
func TestCloseDuringABurst(t *testing.T) {
	dir := mkTree(t)
	w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.WriteFile(filepath.Join(dir, "src/a", fmt.Sprint(i%100)), []byte("x"), 0o644)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %s in a burst", d)
	}
	close(stop)
	<-done
}

// watchOf is the watch descriptor of folder p.
func (w *Watcher) watchOf(t *testing.T, p string) int32 {
	t.Helper()
	for wd, d := range w.b.dirs {
		if d.path == p {
			return wd
		}
	}
	t.Fatalf("%s is not watched", p)
	return -1
}

// A mode change alone (the executable bit, which the sync engine syncs)
// reports the tree, without an OnPath call.
func TestAttributeChangeReportsTree(t *testing.T) {
	dir := mkTree(t)
	f := filepath.Join(dir, "src/a/run.sh")
	os.WriteFile(f, []byte("#!/bin/sh"), 0o644)
	called := make(chan string, 10)
	w, err := New([]Tree{{ID: "t", Dir: dir}}, Options{OnPath: func(_, p string, _ Op) { called <- p }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.Chmod(f, 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, w, "t", 2*time.Second)
	select {
	case p := <-called:
		t.Fatalf("OnPath called for a mode change of %s", p)
	default:
	}
}

// A longer BurstPause lets a burst's events queue in the kernel: fewer
// reads, so fewer wake-ups of the watcher while a writer works.
func TestBurstPauseBatchesReads(t *testing.T) {
	reads := func(opts Options) int {
		dir := mkTree(t)
		w, err := New([]Tree{{ID: "t", Dir: dir}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		for end, i := time.Now().Add(600*time.Millisecond), 0; time.Now().Before(end); i++ {
			os.WriteFile(filepath.Join(dir, "src/a", fmt.Sprint(i%50)), []byte("x"), 0o644)
			time.Sleep(5 * time.Millisecond)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return w.b.reads
	}
	short := reads(Options{Quiet: 300 * time.Millisecond, MaxDelay: 5 * time.Second})
	long := reads(Options{Quiet: 300 * time.Millisecond, MaxDelay: 5 * time.Second, BurstPause: 200 * time.Millisecond})
	if short < 2*long {
		t.Fatalf("%d reads with the default pause, %d with 200 ms; want the longer pause to need at most half", short, long)
	}
	t.Logf("reads in a 600 ms burst: %d (20 ms pause), %d (200 ms)", short, long)
}
