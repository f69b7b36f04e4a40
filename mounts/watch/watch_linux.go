//go:build linux

package watch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// watchMask is what a folder watch asks the kernel for. IN_CLOSE_WRITE
// stands in for IN_MODIFY (one event per write() call, each one queued
// while the writer waits): the sync engine only needs to know a file
// changed, and a file is done once its writer closes it. IN_ATTRIB stays
// for the executable bit, which the engine syncs.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_CLOSE_WRITE | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// listingMask is the events that change a folder's entries.
const listingMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO

// readBuffer holds hundreds of events (16 bytes plus the name each), so
// a burst is read and handled in one go.
const readBuffer = 64 << 10

// Backend names how this build watches folders, for status.
const Backend = "inotify"

// backend is an inotify instance read with poll(2), not through the
// runtime's poller: that one wakes a thread for every event queued, even
// while run waits on purpose to take a burst in one read. An eventfd ends
// the wait on Close.
type backend struct {
	fd, wake int
	done     chan struct{}       // closed by stop
	timer    *time.Timer         // run's pause
	reads    int                 // read calls, for tests; run's goroutine only
	dirs     map[int32]*dirWatch // by watch descriptor; only run uses it after New
	// counted[i]: tree i is on a file system whose folder link count is 2
	// plus its subfolders, so a new folder with 2 links has none to walk.
	counted []bool
}

// dirWatch is one watched folder.
type dirWatch struct {
	path string
	rel  string // relative to its tree's Dir
	tree int
	// excluded are the names in this folder that its tree excludes; the
	// folder's own events about them are not the tree's changes.
	excluded map[string]struct{}
	// moved: the folder was just seen at a new path inside its tree, so
	// its coming IN_MOVE_SELF is no reason to unwatch it.
	moved bool
}

func (b *backend) open(trees []Tree) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("watch: inotify: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("watch: eventfd: %w", err)
	}
	b.fd, b.wake, b.dirs = fd, wake, map[int32]*dirWatch{}
	b.done, b.timer = make(chan struct{}), time.NewTimer(time.Hour)
	b.timer.Stop()
	for _, t := range trees {
		b.counted = append(b.counted, countsSubfolders(t.Dir))
	}
	return nil
}

// stop ends run's wait; the descriptors stay open until run has ended.
func (b *backend) stop() error {
	close(b.done)
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(b.wake, one[:]); err != nil {
		return fmt.Errorf("watch: stop: %w", err)
	}
	return nil
}

func (b *backend) free() error {
	return errors.Join(unix.Close(b.fd), unix.Close(b.wake))
}

func (b *backend) add(p string) (int32, error) {
	wd, err := unix.InotifyAddWatch(b.fd, p, watchMask)
	return int32(wd), err
}

func (b *backend) remove(wd int32) {
	unix.InotifyRmWatch(b.fd, uint32(wd)) // an error: it is gone already
}

// wait waits up to timeout (negative: no limit) for events or the stop.
// stopped wins over events: Close need not wait for a burst to end.
func (b *backend) wait(timeout time.Duration) (ready, stopped bool, err error) {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond) // round up: never spin before a deadline
	}
	fds := []unix.PollFd{{Fd: int32(b.wake), Events: unix.POLLIN}, {Fd: int32(b.fd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue // a signal (the runtime's preemption): the timeout restarts, which only delays a report
		}
		if err != nil {
			return false, false, fmt.Errorf("watch: poll: %w", err)
		}
		return fds[1].Revents != 0, fds[0].Revents != 0, nil
	}
}

// pause waits d unless stopped first: run's wait for a burst to queue
// up. It parks the goroutine instead of sleeping in a system call, which
// the runtime would hand its processor away from (and back to) every time.
func (b *backend) pause(d time.Duration) (stopped bool) {
	b.timer.Reset(d)
	select {
	case <-b.timer.C:
		return false
	case <-b.done:
		b.timer.Stop()
		return true
	}
}

// read reads the queued events into buf; 0 when there are none.
func (b *backend) read(buf []byte) (int, error) {
	b.reads++
	for {
		n, err := unix.Read(b.fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, nil
		case err != nil:
			return 0, fmt.Errorf("watch: read events: %w", err)
		}
		return n, nil
	}
}

// addTree watches dir, a folder of tree i, and the folders below it. It
// returns dir's watch and whether dir was watched already (it moved).
func (w *Watcher) addTree(i int, dir string) (root *dirWatch, known bool) {
	first := true
	walkTree(w.trees[i], dir, func(p, rel string) bool {
		d, k, ok := w.addWatch(i, p, rel)
		if first {
			root, known, first = d, k, false
		}
		return ok
	})
	return root, known
}

// addWatch watches folder p (rel in tree i). A folder watched already
// keeps its descriptor and takes its new path. ok false: stop adding
// (cap or system limit).
func (w *Watcher) addWatch(i int, p, rel string) (d *dirWatch, known, ok bool) {
	if !w.reserve() {
		return nil, false, false
	}
	wd, err := w.b.add(p)
	if err != nil {
		w.release(1)
		if errors.Is(err, unix.ENOSPC) { // the kernel's per-user watch limit
			w.systemLimit()
			return nil, false, false
		}
		w.opts.Logger.Debug("watch: add", "dir", p, "err", err) // vanished, or not readable
		return nil, false, true
	}
	if d, known = w.b.dirs[wd]; known {
		w.release(1)
	} else {
		d = &dirWatch{}
		w.b.dirs[wd] = d
	}
	d.path, d.rel, d.tree, d.excluded = p, rel, i, excludedNames(w.trees[i], rel)
	return d, known, true
}

// addFolder watches folder p, a new entry called name in parent's folder
// (made or moved there), and the folders below it. It returns p's watch
// and whether p was watched already (it moved).
func (w *Watcher) addFolder(parent *dirWatch, p, name string) (*dirWatch, bool) {
	rel := name
	if parent.rel != "." {
		rel = parent.rel + "/" + name
	}
	if len(p) > len(rel) && p[len(p)-len(rel)-1] == '/' && p[len(p)-len(rel):] == rel {
		rel = p[len(p)-len(rel):] // share p's bytes, as relTo does
	}
	d, known, ok := w.addWatch(parent.tree, p, rel)
	if !ok || d == nil {
		return d, known
	}
	// Most new folders are empty or hold files only: seen by their link
	// count, that spares reading them (4 system calls under emulation).
	// The count is read after the watch is in place, so a subfolder made
	// since is either counted or raises its own event.
	var st unix.Stat_t
	if w.b.counted[parent.tree] && unix.Lstat(p, &st) == nil && st.Nlink == 2 {
		return d, known
	}
	w.addTree(parent.tree, p)
	return d, known
}

// countsSubfolders reports whether dir's file system keeps a folder's
// link count at 2 plus its subfolders (btrfs and many FUSE file systems
// do not).
func countsSubfolders(dir string) bool {
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil {
		return false
	}
	switch fs.Type {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}

// excludedNames are the entries of folder rel that tree t excludes.
func excludedNames(t Tree, rel string) map[string]struct{} {
	var names map[string]struct{}
	for _, ex := range t.Exclude {
		dir, name := splitRel(ex)
		if dir == rel {
			if names == nil {
				names = map[string]struct{}{}
			}
			names[name] = struct{}{}
		}
	}
	return names
}

// splitRel splits a relative path at its last slash ("." for none).
func splitRel(rel string) (dir, name string) {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i], rel[i+1:]
	}
	return ".", rel
}

// run reads events a buffer at a time and reports trees when due. It
// waits in poll: until the next report is due while one is pending, with
// no time limit while idle, so an idle watcher never wakes.
func (w *Watcher) run() {
	defer w.wg.Done()
	defer close(w.changes)
	p := newPending(len(w.trees), w.opts.Quiet, w.opts.MaxDelay)
	buf := make([]byte, readBuffer)
	next := time.Duration(-1)
	for {
		ready, stopped, err := w.b.wait(next)
		inBurst := next > 0
		if stopped {
			return
		}
		if err != nil {
			w.opts.Logger.Warn("watch: waiting for events failed; the sync's periodic rescan still runs", "err", err)
			return
		}
		n := 0
		if ready {
			if n, err = w.b.read(buf); err != nil {
				w.opts.Logger.Warn("watch: reading events failed; the sync's periodic rescan still runs", "err", err)
				return
			}
		}
		now := time.Now()
		w.events(buf[:n], now, p)
		next = p.flush(now, w.send)
		if next == 0 {
			next = -1 // nothing pending: no timeout
			continue
		}
		if n > 0 && inBurst && w.b.pause(min(w.opts.BurstPause, next)) {
			return
		}
	}
}

// events handles a buffer of raw inotify events.
func (w *Watcher) events(buf []byte, now time.Time, p *pending) {
	for len(buf) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(buf[0:4]))
		mask := binary.NativeEndian.Uint32(buf[4:8])
		end := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[12:16]))
		if end > len(buf) {
			w.opts.Logger.Warn("watch: a truncated inotify event", "bytes", len(buf))
			return
		}
		name := buf[unix.SizeofInotifyEvent:end]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i] // the kernel pads names with NULs
		}
		w.event(wd, mask, name, now, p)
		buf = buf[end:]
	}
}

// event handles one raw event: name is the entry of the watched folder it
// is about, empty when it is about the folder itself.
func (w *Watcher) event(wd int32, mask uint32, name []byte, now time.Time, p *pending) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.overflow(now, p)
		return
	}
	d := w.b.dirs[wd]
	if d == nil {
		return // a late event of a watch that was removed
	}
	if mask&unix.IN_IGNORED != 0 { // the folder is gone, or was unwatched
		delete(w.b.dirs, wd)
		w.release(1)
		return
	}
	if _, ex := d.excluded[string(name)]; ex {
		return // an excluded folder itself (made, removed, renamed)
	}
	p.mark(d.tree, now)
	if mask&unix.IN_MOVE_SELF != 0 {
		w.movedSelf(d)
		return
	}
	if len(name) == 0 {
		return
	}
	var path string
	if mask&unix.IN_ISDIR != 0 && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
		// Entries made in the new folder before its watch was added are
		// covered by this event's report.
		path = d.path + "/" + string(name)
		if nd, known := w.addFolder(d, path, string(name)); known && mask&unix.IN_MOVED_TO != 0 {
			nd.moved = true
		}
	}
	if w.opts.OnPath != nil {
		w.onPath(d, mask, name, path)
	}
}

// onPath passes a content change on to Options.OnPath.
func (w *Watcher) onPath(d *dirWatch, mask uint32, name []byte, path string) {
	op := Listing
	switch {
	case mask&unix.IN_CLOSE_WRITE != 0:
		op = Changed
	case mask&listingMask == 0:
		return // attributes only: a touch from the guest must not echo back
	}
	if path == "" {
		path = d.path + "/" + string(name)
	}
	w.opts.OnPath(w.trees[d.tree].ID, path, op)
}

// movedSelf handles a watched folder that was renamed. Moved inside its
// tree, it was re-added at its new path just before (IN_MOVED_TO comes
// first). Otherwise it left the tree or went into an excluded folder: it
// and the folders below it are no longer the tree's.
func (w *Watcher) movedSelf(d *dirWatch) {
	if d.moved {
		d.moved = false
		return
	}
	prefix := d.path + "/"
	n := 0
	for wd, o := range w.b.dirs {
		if o.path == d.path || strings.HasPrefix(o.path, prefix) {
			w.b.remove(wd)
			delete(w.b.dirs, wd) // the IN_IGNORED that follows finds nothing
			n++
		}
	}
	w.release(n)
}

// overflow handles a full event queue: events were lost, so every tree
// is reported, and the trees are walked again for folders made meanwhile.
func (w *Watcher) overflow(now time.Time, p *pending) {
	w.opts.Logger.Debug("watch: the inotify queue overflowed; reporting every tree")
	p.markAll(now)
	for i, t := range w.trees {
		w.addTree(i, t.Dir)
	}
}
