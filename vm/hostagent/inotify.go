package hostagent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/mounts/watch"
	"github.com/vmdock/vmdock/mounts/watchscope"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
)

// touchEvery batches host edits in shares into one request to the guest.
const touchEvery = 100 * time.Millisecond

// shareWatch passes host edits in shared folders on to the guest, which
// touches the same paths so its kernel raises the inotify events that
// virtiofs and 9p do not (webpack, nodemon, Vite in containers).
type shareWatch struct {
	w      *watch.Watcher
	cancel context.CancelFunc
	mu     sync.Mutex
	paths  map[string]struct{}  // guest paths to touch
	shares []control.ShareWatch // what is watched, for status; fixed at start
}

// startShareWatch watches the share mounts with inotify on. The first walk
// of the trees runs in the background: a shared home folder has many
// folders, and the boot need not wait for them.
func (ha *hostAgent) startShareWatch() {
	shares := mounts.Shares(ha.cfg.Mounts, ha.cfg.MountType)
	trees, status := shareTrees(shares, ha.watchLeftOut(), shareWatchOff)
	guestOf := map[string]string{}
	for _, sh := range shares {
		guestOf[sh.Tag] = sh.GuestPath
	}
	ctx, cancel := context.WithCancel(context.Background())
	sw := &shareWatch{cancel: cancel, paths: map[string]struct{}{}, shares: status}
	ha.mu.Lock()
	ha.shareWatch = sw
	ha.mu.Unlock()
	if len(trees) == 0 {
		return
	}
	go func() {
		onPath := func(id, p string, op watch.Op) {
			sw.add(guestPath(trees, guestOf, id, p), op)
		}
		w, err := watch.New(trees, watch.Options{OnPath: onPath, Logger: slog.Default().With("service", "share-inotify")})
		if err != nil {
			slog.Warn("inotify for shares: cannot watch the shared folders", "err", err)
			return
		}
		sw.mu.Lock()
		sw.w = w
		sw.mu.Unlock()
		go func() { // drain: only the paths matter here
			for range w.Changes() {
			}
		}()
		sw.sendLoop(ctx, ha)
		w.Close()
	}()
}

// watchLeftOut are the host folders no share watch covers: vmdock's home
// (the instance folders: VM disks, the host agent's logs), the image cache
// and the OS's busy folders in the user's home.
func (ha *hostAgent) watchLeftOut() []watchscope.Folder {
	home, err := os.UserHomeDir()
	if err != nil {
		slog.Debug("inotify for shares: no home folder; only vmdock's folders are left out", "err", err)
	}
	cache, err := images.DefaultCacheDir()
	if err != nil {
		slog.Debug("inotify for shares: no image cache folder to leave out", "err", err)
	}
	// The instance folder is <VMDOCK_HOME>/<profile>, whatever this
	// process's environment says.
	return watchscope.Defaults(home, filepath.Dir(ha.inst.Dir), cache)
}

// shareTrees are the trees to watch for shares, and what status says of
// each share: a share with inotify on is watched less its excludes and
// the left-out folders inside it, unless off says why this build watches
// no share.
func shareTrees(shares []driver.Share, leftOut []watchscope.Folder, off string) ([]watch.Tree, []control.ShareWatch) {
	var trees []watch.Tree
	status := make([]control.ShareWatch, 0, len(shares))
	for _, sh := range shares {
		st := control.ShareWatch{HostPath: sh.HostPath, GuestPath: sh.GuestPath, Watch: watch.Backend}
		switch {
		case !sh.Inotify:
			st.Watch, st.Off = "off", "inotify: false in its mount"
		case off != "":
			st.Watch, st.Off = "off", off
		default:
			skips := watchscope.Skips(sh.HostPath, watchscope.Resolve(sh.HostPath), leftOut)
			for _, ex := range sh.Exclude {
				st.LeftOut = append(st.LeftOut, control.LeftOutFolder{Path: filepath.Join(sh.HostPath, ex), Why: "excluded: in the guest only"})
			}
			for _, s := range skips {
				st.LeftOut = append(st.LeftOut, control.LeftOutFolder{Path: s.Path, Why: s.Why})
			}
			exclude := append(slices.Clone(sh.Exclude), watchscope.Rels(skips)...)
			trees = append(trees, watch.Tree{ID: sh.Tag, Dir: sh.HostPath, Exclude: exclude})
		}
		status = append(status, st)
	}
	return trees, status
}

// guestPath maps a changed host path to where the guest sees it.
func guestPath(trees []watch.Tree, guestOf map[string]string, id, p string) string {
	for _, t := range trees {
		if t.ID == id {
			if rel, err := filepath.Rel(t.Dir, p); err == nil {
				return filepath.Join(guestOf[id], rel)
			}
		}
	}
	return ""
}

func (sw *shareWatch) add(guest string, op watch.Op) {
	if guest == "" {
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.paths[guest] = struct{}{}
	if op == watch.Listing {
		// A created, removed or renamed entry changes its folder's listing.
		sw.paths[filepath.Dir(guest)] = struct{}{}
	}
}

func (sw *shareWatch) take() []string {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if len(sw.paths) == 0 {
		return nil
	}
	out := make([]string, 0, len(sw.paths))
	for p := range sw.paths {
		out = append(out, p)
	}
	sw.paths = map[string]struct{}{}
	sort.Strings(out)
	return out
}

// sendLoop sends the collected paths to the guest every touchEvery, in
// requests of at most 4096 paths.
func (sw *shareWatch) sendLoop(ctx context.Context, ha *hostAgent) {
	t := time.NewTicker(touchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		paths := sw.take()
		for len(paths) > 0 {
			n := min(len(paths), 4096)
			c, _ := ha.link.state()
			if c != nil {
				tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if err := c.Touch(tctx, paths[:n]); err != nil {
					slog.Debug("inotify for shares: touch", "err", err)
				}
				cancel()
			}
			paths = paths[n:]
		}
	}
}

// capped reports a watch cap hit, for status.
func (sw *shareWatch) capped() bool {
	sw.mu.Lock()
	w := sw.w
	sw.mu.Unlock()
	return w != nil && w.Capped()
}

// status is what each share's watch covers, for status.
func (sw *shareWatch) status() []control.ShareWatch {
	capped := sw.capped()
	out := make([]control.ShareWatch, len(sw.shares))
	for i, st := range sw.shares {
		st.Capped = capped && st.Watch != "off"
		out[i] = st
	}
	return out
}

func (ha *hostAgent) stopShareWatch() {
	ha.mu.Lock()
	sw := ha.shareWatch
	ha.shareWatch = nil
	ha.mu.Unlock()
	if sw != nil {
		sw.cancel()
	}
}
