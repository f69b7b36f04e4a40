//go:build !linux && !(darwin && cgo)

package watch

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Backend names how this build watches folders, for status.
const Backend = "fsnotify"

// backend is fsnotify (kqueue on BSDs, and on macOS built without cgo): a
// folder watch only.
type backend struct {
	fs *fsnotify.Watcher
}

func (b *backend) open([]Tree) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	b.fs = fw
	return nil
}

// stop closes fsnotify's channels, which ends run.
func (b *backend) stop() error { return b.fs.Close() }

func (b *backend) free() error { return nil }

// addTree watches dir, a folder of tree i, and every folder below it that
// is not excluded.
func (w *Watcher) addTree(i int, dir string) {
	walkTree(w.trees[i], dir, func(p, _ string) bool { return w.addWatch(p) })
}

func (w *Watcher) addWatch(p string) bool {
	if !w.reserve() {
		return false
	}
	err := w.b.fs.Add(p)
	if err == nil {
		return true
	}
	w.release(1)
	switch {
	case errors.Is(err, fsnotify.ErrClosed):
		return false
	case errors.Is(err, syscall.ENOSPC):
		w.systemLimit()
		return false
	}
	w.opts.Logger.Debug("watch: add", "dir", p, "err", err)
	return true
}

// treeOf is the index of the tree a path belongs to, and the path
// relative to it.
func (w *Watcher) treeOf(p string) (int, string, bool) {
	for i, t := range w.trees {
		if rel, ok := relTo(t.Dir, p); ok {
			return i, rel, true
		}
	}
	return 0, "", false
}

// run turns raw events into per-tree reports after Quiet (or MaxDelay).
// Its timer runs only while a report is pending: an idle watcher never
// wakes.
func (w *Watcher) run() {
	defer w.wg.Done()
	defer close(w.changes)
	p := newPending(len(w.trees), w.opts.Quiet, w.opts.MaxDelay)
	timer := newReportTimer()
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-w.b.fs.Events:
			if !ok {
				return
			}
			w.event(ev, p)
		case err, ok := <-w.b.fs.Errors:
			if !ok {
				return
			}
			// An overflowed queue lost events: report every tree.
			w.opts.Logger.Debug("watch", "err", err)
			p.markAll(time.Now())
		case <-timer.C:
		}
		timer.flush(p, w.send)
	}
}

func (w *Watcher) event(ev fsnotify.Event, p *pending) {
	i, rel, found := w.treeOf(ev.Name)
	if !found || isExcluded(w.trees[i], rel) {
		return
	}
	if w.opts.OnPath != nil && !ev.Has(fsnotify.Chmod) {
		op := Changed
		if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			op = Listing
		}
		w.opts.OnPath(w.trees[i].ID, ev.Name, op)
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			w.addTree(i, ev.Name) // files made in it before the watch count via this event
		}
	}
	p.mark(i, time.Now())
}
