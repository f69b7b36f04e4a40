// Package watch reports changes in folder trees, coalesced per tree: the
// sync engine looks at a side when this tells it to (its own rescan waits
// 20 times as long as the last one took, at least 10 s), in the guest for
// the sync copies and on a Linux host for the synced folders.
//
// A tree is watched folder by folder (inotify watches folders, not files);
// new folders are added as they appear. Excluded subfolders (dependency
// trees) are not watched. The number of watches is capped: past the cap the
// rest of a tree goes unwatched (the engine's rescan still covers it), and
// Watcher.Capped says so.
//
// On Linux the watcher reads inotify itself (watch_linux.go): in the guest
// it runs under emulation next to the writers it watches, so each event
// must cost little. Elsewhere it uses fsnotify (watch_other.go).
package watch

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options tune a Watcher; zero values take the defaults.
type Options struct {
	// Quiet is how long a tree must be quiet after a change before it is
	// reported (default 50 ms): a burst of writes is one report.
	Quiet time.Duration
	// MaxDelay bounds the wait in a burst that never goes quiet (default
	// 500 ms).
	MaxDelay time.Duration
	// BurstPause is how long the Linux backend lets events queue in the
	// kernel between two reads while a burst lasts (default 20 ms): fewer
	// wake-ups cost the writers less, and a report may come this much
	// later. It never exceeds the time to the next report.
	BurstPause time.Duration
	// MaxWatches caps the folders watched across all trees (default
	// 65536; Linux's default per-user limit is often 8192..1048576).
	MaxWatches int
	Logger     *slog.Logger
	// OnPath, when set, is called for every content change (not for
	// attribute-only changes) with the tree's ID and the changed path, as
	// it happens; Changes still reports trees coalesced.
	OnPath func(id, path string, op Op)
}

// defaultBurstPause is how long the Linux backend waits after handling
// events in a burst (a report was pending already), so that the kernel
// queues the burst's next events and one read takes many of them: under
// emulation each wake-up of the watcher costs the writer too. Measured in
// a TCG guest, 2,000 files created (deleted) in a watched folder took 1.3x
// (1.5x) as long as unwatched with 20 ms, 1.6x (2.3x) with 10 ms, 1.9x
// (2.5x) with 5 ms; fsnotify took 2.1x (3.1x). Events that arrive during
// the pause count as seen at its end, so a burst's report may come this
// much later; a lone edit is read at once.
const defaultBurstPause = 20 * time.Millisecond

// Op is what happened to a path passed to OnPath.
type Op int

const (
	// Changed: a file was written. On Linux that is reported when the
	// writer closes it, once per open instead of once per write.
	Changed Op = iota
	// Listing: the folder's entries changed (create, remove, rename of
	// the path).
	Listing
)

// Tree is one folder tree to watch.
type Tree struct {
	ID      string
	Dir     string
	Exclude []string // subfolders, relative to Dir, left unwatched
}

// Watcher watches trees and sends the ID of each tree that changed.
type Watcher struct {
	opts    Options
	trees   []Tree
	changes chan string
	b       backend // the platform's watch; only run touches it after New

	mu      sync.Mutex
	watches int
	capped  bool
	closed  bool
	wg      sync.WaitGroup
}

// New starts watching trees. Changes arrive on Changes.
func New(trees []Tree, opts Options) (*Watcher, error) {
	if opts.Quiet <= 0 {
		opts.Quiet = 50 * time.Millisecond
	}
	if opts.BurstPause <= 0 {
		opts.BurstPause = defaultBurstPause
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 500 * time.Millisecond
	}
	if opts.MaxWatches <= 0 {
		opts.MaxWatches = 65536
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w := &Watcher{opts: opts, trees: trees, changes: make(chan string, len(trees)+1)}
	if err := w.b.open(trees); err != nil {
		return nil, err
	}
	for i, t := range trees {
		w.addTree(i, t.Dir)
	}
	w.wg.Add(1)
	go w.run()
	return w, nil
}

// Changes delivers the ID of a tree after a change in it went quiet. A
// slow reader misses nothing that matters: a pending ID is sent once.
func (w *Watcher) Changes() <-chan string { return w.changes }

// Deliver passes each changed tree's ID to fn until ctx ends, the watcher
// closes, or fn returns false.
func (w *Watcher) Deliver(ctx context.Context, fn func(id string) bool) {
	for {
		select {
		case <-ctx.Done():
			return
		case id, ok := <-w.changes:
			if !ok || !fn(id) {
				return
			}
		}
	}
}

// Capped reports whether some folders went unwatched for the cap.
func (w *Watcher) Capped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.capped
}

// Watches is the number of folders watched.
func (w *Watcher) Watches() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watches
}

// Close stops watching and waits for the watcher's goroutine to end.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	err := w.b.stop()
	w.wg.Wait()
	return errors.Join(err, w.b.free())
}

// walkTree calls add for dir and every folder below it that tree t does
// not exclude, with its path relative to t.Dir, until add returns false.
func walkTree(t Tree, dir string, add func(p, rel string) bool) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // vanished meanwhile, or unreadable: nothing to watch
		}
		rel, ok := relTo(t.Dir, p)
		if !ok {
			return filepath.SkipDir
		}
		if isExcluded(t, rel) {
			return filepath.SkipDir
		}
		if !add(p, rel) {
			return filepath.SkipAll
		}
		return nil
	})
}

// relTo is p relative to dir ("." for dir itself), if p is in dir. Where
// it can, it is the tail of p itself: a watch keeps both, one each per
// folder, and a home folder has tens of thousands of them.
func relTo(dir, p string) (string, bool) {
	if p == dir {
		return ".", true
	}
	if len(p) > len(dir)+1 && p[len(dir)] == filepath.Separator && strings.HasPrefix(p, dir) {
		if rel := p[len(dir)+1:]; filepath.IsLocal(rel) && filepath.Clean(rel) == rel {
			return rel, true
		}
	}
	rel, err := filepath.Rel(dir, p)
	return rel, err == nil && filepath.IsLocal(rel)
}

// isExcluded reports whether rel, a path relative to t.Dir, is in one of
// t's excluded subfolders.
func isExcluded(t Tree, rel string) bool {
	for _, ex := range t.Exclude {
		if rel == ex || strings.HasPrefix(rel, ex+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// reserve takes one watch from the cap, or marks the watcher capped.
func (w *Watcher) reserve() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watches >= w.opts.MaxWatches {
		if !w.capped {
			w.opts.Logger.Warn("watch: folder watch cap reached; the rest is covered by the sync's periodic rescan only", "cap", w.opts.MaxWatches)
		}
		w.capped = true
		return false
	}
	w.watches++
	return true
}

// release gives back n watches: failed adds and forgotten folders.
func (w *Watcher) release(n int) {
	w.mu.Lock()
	w.watches -= n
	w.mu.Unlock()
}

// systemLimit marks the watcher capped by the kernel's per-user limit.
func (w *Watcher) systemLimit() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.capped {
		w.opts.Logger.Warn("watch: the system's inotify watch limit is reached (fs.inotify.max_user_watches); the rest is covered by the sync's periodic rescan only")
	}
	w.capped = true
}

// send hands a tree's ID to the reader without waiting: a busy reader
// gets it on a later try.
func (w *Watcher) send(tree int) bool {
	select {
	case w.changes <- w.trees[tree].ID:
		return true
	default:
		return false
	}
}

// reportTimer wakes a backend's run loop when the next report is due; it
// runs only while one is pending, so an idle watcher never wakes.
type reportTimer struct{ *time.Timer }

func newReportTimer() reportTimer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return reportTimer{t}
}

// flush sends the reports due now and sets the timer for the next one.
func (t reportTimer) flush(p *pending, send func(i int) bool) {
	if next := p.flush(time.Now(), send); next > 0 {
		t.Reset(next)
	} else {
		t.Stop()
	}
}

// pending tracks the trees with an unreported change, by tree index, and
// says when the next report is due: run sleeps until then, and an idle
// watcher (nothing pending) never wakes, as every wake-up of the guest
// agent costs under emulation.
type pending struct {
	quiet, maxDelay time.Duration
	first, last     []time.Time // zero first: nothing pending
	n               int
}

func newPending(trees int, quiet, maxDelay time.Duration) *pending {
	return &pending{quiet: quiet, maxDelay: maxDelay, first: make([]time.Time, trees), last: make([]time.Time, trees)}
}

// mark notes a change in tree i at now.
func (p *pending) mark(i int, now time.Time) {
	if p.first[i].IsZero() {
		p.first[i] = now
		p.n++
	}
	p.last[i] = now
}

// markAll notes a change in every tree (events were lost).
func (p *pending) markAll(now time.Time) {
	for i := range p.first {
		p.mark(i, now)
	}
}

// flush sends the trees whose report is due at now and returns how long
// until the next one is due, or 0 when nothing is pending. A tree whose
// send fails stays pending and is tried again after half the quiet time.
func (p *pending) flush(now time.Time, send func(i int) bool) time.Duration {
	if p.n == 0 {
		return 0
	}
	var next time.Duration
	for i, f := range p.first {
		if f.IsZero() {
			continue
		}
		due := min(p.last[i].Add(p.quiet).Sub(now), f.Add(p.maxDelay).Sub(now))
		if due <= 0 {
			if send(i) {
				p.first[i], p.last[i] = time.Time{}, time.Time{}
				p.n--
				continue
			}
			due = p.quiet / 2
		}
		if next == 0 || due < next {
			next = due
		}
	}
	return next
}
