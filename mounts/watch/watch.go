// Package watch reports changes in folder trees, coalesced per tree: the
// sync engine looks at a side when this tells it to (its own rescan runs
// only every 10 s), in the guest for the sync copies and on a Linux host
// for the synced folders.
//
// A tree is watched folder by folder (inotify watches folders, not files);
// new folders are added as they appear. Excluded subfolders (dependency
// trees) are not watched. The number of watches is capped: past the cap the
// rest of a tree goes unwatched (the engine's rescan still covers it), and
// Watcher.Capped says so.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Options tune a Watcher; zero values take the defaults.
type Options struct {
	// Quiet is how long a tree must be quiet after a change before it is
	// reported (default 50 ms): a burst of writes is one report.
	Quiet time.Duration
	// MaxDelay bounds the wait in a burst that never goes quiet (default
	// 500 ms).
	MaxDelay time.Duration
	// MaxWatches caps the folders watched across all trees (default
	// 65536; Linux's default per-user limit is often 8192..1048576).
	MaxWatches int
	Logger     *slog.Logger
	// OnPath, when set, is called for every content change (not for
	// attribute-only changes) with the tree's ID and the changed path, as
	// it happens; Changes still reports trees coalesced.
	OnPath func(id, path string, op Op)
}

// Op is what happened to a path passed to OnPath.
type Op int

const (
	// Changed: a file was written, or a path was created, removed or
	// renamed (the parent folder's listing changed).
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
	fs      *fsnotify.Watcher
	changes chan string

	mu      sync.Mutex
	trees   []Tree
	watches int
	capped  bool
	done    chan struct{}
	wg      sync.WaitGroup
}

// New starts watching trees. Changes arrive on Changes.
func New(trees []Tree, opts Options) (*Watcher, error) {
	if opts.Quiet <= 0 {
		opts.Quiet = 50 * time.Millisecond
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
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	w := &Watcher{opts: opts, fs: fw, changes: make(chan string, len(trees)+1), trees: trees, done: make(chan struct{})}
	for _, t := range trees {
		w.addTree(t.Dir)
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

// Close stops watching.
func (w *Watcher) Close() error {
	select {
	case <-w.done:
		return nil
	default:
	}
	close(w.done)
	err := w.fs.Close()
	w.wg.Wait()
	return err
}

// addTree watches dir and every folder below it that is not excluded.
func (w *Watcher) addTree(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // vanished meanwhile, or unreadable: nothing to watch
		}
		if w.excluded(p) {
			return filepath.SkipDir
		}
		if !w.addWatch(p) {
			return filepath.SkipAll
		}
		return nil
	})
}

func (w *Watcher) addWatch(p string) bool {
	w.mu.Lock()
	if w.watches >= w.opts.MaxWatches {
		if !w.capped {
			w.opts.Logger.Warn("watch: folder watch cap reached; the rest is covered by the sync's periodic rescan only", "cap", w.opts.MaxWatches)
		}
		w.capped = true
		w.mu.Unlock()
		return false
	}
	w.watches++
	w.mu.Unlock()
	if err := w.fs.Add(p); err != nil {
		w.mu.Lock()
		w.watches--
		w.mu.Unlock()
		if errors.Is(err, fsnotify.ErrClosed) {
			return false
		}
		if errors.Is(err, syscall.ENOSPC) { // the kernel's per-user watch limit
			w.mu.Lock()
			if !w.capped {
				w.opts.Logger.Warn("watch: the system's inotify watch limit is reached (fs.inotify.max_user_watches); the rest is covered by the sync's periodic rescan only")
			}
			w.capped = true
			w.mu.Unlock()
			return false
		}
		w.opts.Logger.Debug("watch: add", "dir", p, "err", err)
	}
	return true
}

// treeOf is the tree a path belongs to.
func (w *Watcher) treeOf(p string) (Tree, string, bool) {
	for _, t := range w.trees {
		if rel, err := filepath.Rel(t.Dir, p); err == nil && filepath.IsLocal(rel) || p == t.Dir {
			if p == t.Dir {
				rel = "."
			}
			return t, rel, true
		}
	}
	return Tree{}, "", false
}

func (w *Watcher) excluded(p string) bool {
	t, rel, ok := w.treeOf(p)
	return ok && isExcluded(t, rel)
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

// run turns raw events into per-tree reports after Quiet (or MaxDelay).
// Its tick runs only while a report is pending: an idle watcher never
// wakes (under emulation every wake-up of the guest agent costs).
func (w *Watcher) run() {
	defer w.wg.Done()
	defer close(w.changes)
	first := map[string]time.Time{} // tree ID -> first unreported change
	last := map[string]time.Time{}
	tick := time.NewTicker(w.opts.Quiet / 2)
	tick.Stop()
	defer tick.Stop()
	ticking := false
	pending := func() {
		if !ticking {
			tick.Reset(w.opts.Quiet / 2)
			ticking = true
		}
	}
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			t, rel, found := w.treeOf(ev.Name)
			if !found || isExcluded(t, rel) {
				continue
			}
			if w.opts.OnPath != nil && !ev.Has(fsnotify.Chmod) {
				op := Changed
				if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
					op = Listing
				}
				w.opts.OnPath(t.ID, ev.Name, op)
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					w.addTree(ev.Name) // files made in it before the watch count via this event
				}
			}
			now := time.Now()
			if _, ok := first[t.ID]; !ok {
				first[t.ID] = now
			}
			last[t.ID] = now
			pending()
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			// An overflowed queue lost events: report every tree.
			w.opts.Logger.Debug("watch", "err", err)
			now := time.Now()
			for _, t := range w.trees {
				first[t.ID], last[t.ID] = now, now
			}
			pending()
		case now := <-tick.C:
			for id, f := range first {
				if now.Sub(last[id]) < w.opts.Quiet && now.Sub(f) < w.opts.MaxDelay {
					continue
				}
				select {
				case w.changes <- id:
					delete(first, id)
					delete(last, id)
				default: // the reader is busy; try again next tick
				}
			}
			if len(first) == 0 {
				tick.Stop()
				ticking = false
			}
		}
	}
}
