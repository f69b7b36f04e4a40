//go:build darwin && cgo

package watch

import (
	"fmt"
	"time"

	"github.com/fsnotify/fsevents"
)

// Backend names how this build watches folders, for status.
const Backend = "fsevents"

// backend is one FSEvents stream over every tree, with file-level events.
// FSEvents watches a tree whole, whatever its size, so a shared home folder
// costs one stream, not a descriptor per file as kqueue would.
type backend struct {
	es    *fsevents.EventStream
	done  chan struct{}
	trees realTrees
	echo  *echoFilter
}

// fseventsLatency is FSEvents' own coalescing before it calls back; the
// Watcher's Quiet still groups a burst into one report.
const fseventsLatency = 20 * time.Millisecond

func (b *backend) open(trees []Tree) error {
	b.trees, b.echo, b.done = newRealTrees(trees), newEchoFilter(), make(chan struct{})
	b.es = &fsevents.EventStream{
		Paths:   b.trees.real,
		Latency: fseventsLatency,
		Flags:   fsevents.CreateFlags(fseventsFileEvents | fseventsNoDefer),
		Events:  make(chan []fsevents.Event, 16),
	}
	if err := b.es.Start(); err != nil {
		return fmt.Errorf("watch: fsevents: %w", err)
	}
	return nil
}

// stop stops the stream first, while run still drains its channel (the
// stream's callback blocks on a full one), then ends run.
func (b *backend) stop() error {
	b.es.Stop()
	close(b.done)
	return nil
}

func (b *backend) free() error { return nil }

// addTree counts a tree as one watch: the stream covers its folders.
func (w *Watcher) addTree(i int, dir string) {
	if dir == w.trees[i].Dir {
		w.reserve()
	}
}

// run turns FSEvents reports into OnPath calls and per-tree reports after
// Quiet (or MaxDelay); its timer runs only while a report is pending.
func (w *Watcher) run() {
	defer w.wg.Done()
	defer close(w.changes)
	p := newPending(len(w.trees), w.opts.Quiet, w.opts.MaxDelay)
	timer := newReportTimer()
	defer timer.Stop()
	for {
		select {
		case <-w.b.done:
			return
		case evs := <-w.b.es.Events:
			now := time.Now()
			for _, ev := range evs {
				w.event(decodeItem(ev.Path, uint32(ev.Flags)), now, p)
			}
		case <-timer.C:
		}
		timer.flush(p, w.send)
	}
}

func (w *Watcher) event(ev itemEvent, now time.Time, p *pending) {
	if ev.dropped {
		w.opts.Logger.Debug("watch: fsevents dropped events; reporting every tree", "path", ev.path)
		p.markAll(now)
		return
	}
	i, path, ok := w.b.trees.find(ev.path)
	if !ok {
		return
	}
	op, change := w.b.echo.op(itemEvent{path: path, created: ev.created, removed: ev.removed, renamed: ev.renamed, modified: ev.modified})
	if !change {
		return
	}
	p.mark(i, now)
	if w.opts.OnPath != nil {
		w.opts.OnPath(w.trees[i].ID, path, op)
	}
}
