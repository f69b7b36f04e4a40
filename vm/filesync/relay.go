package filesync

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/mounts/watch"
	"github.com/vmdock/vmdock/mounts/watchscope"
	"github.com/vmdock/vmdock/vm/control"
)

// touchEvery batches host edits in shares into one request to the guest.
const touchEvery = 100 * time.Millisecond

// capProblem is what status says while the share watch hit its cap.
const capProblem = "inotify for shares: the folder watch limit is reached; edits in the unwatched folders raise no events in containers (exclude large subfolders, or raise fs.inotify.max_user_watches)"

// ShareConfig is what ShareRelay needs of the instance and the host agent.
type ShareConfig struct {
	// Shares are the instance's resolved shares (mounts.Shares); those
	// with inotify on are watched.
	Shares []mounts.Share
	// InstanceDir is the instance folder; vmdock's home, which holds it,
	// is left out of every watch.
	InstanceDir string
	// Current returns the guest agent session now, nil while there is
	// none; edits collected meanwhile are dropped.
	Current func() *agent.Client
	// Paused says the VM is paused while idle: edits are kept (at most
	// maxQueued paths) and sent when it runs again, so a save in the
	// editor does not wake it.
	Paused func() bool
}

// maxQueued bounds the paths kept while the VM is paused; beyond it an
// edit raises no event in the guest, as beyond the watch limit.
const maxQueued = 1 << 16

// ShareRelay passes host edits in shared folders on to the guest, which
// touches the same paths so its kernel raises the inotify events that
// virtiofs and 9p do not (webpack, nodemon, Vite in containers). A nil
// *ShareRelay is one that never runs.
type ShareRelay struct {
	cfg ShareConfig

	mu  sync.Mutex
	run *shareWatch // nil while not running
}

// NewShareRelay returns the relay for cfg's shares, not yet running.
func NewShareRelay(cfg ShareConfig) *ShareRelay {
	return &ShareRelay{cfg: cfg}
}

// shareWatch is one run of the relay.
type shareWatch struct {
	w      *watch.Watcher
	cancel context.CancelFunc
	mu     sync.Mutex
	paths  map[string]struct{}  // guest paths to touch
	shares []control.ShareWatch // what is watched, for status; fixed at start
}

// Start watches the share mounts with inotify on. The first walk of the
// trees runs in the background: a shared home folder has many folders,
// and the boot need not wait for them.
func (r *ShareRelay) Start() {
	if r == nil {
		return
	}
	shares := r.cfg.Shares
	trees, status := shareTrees(shares, watchLeftOut(r.cfg.InstanceDir), shareWatchOff)
	guestOf := map[string]string{}
	for _, sh := range shares {
		guestOf[sh.Tag] = sh.GuestPath
	}
	ctx, cancel := context.WithCancel(context.Background())
	sw := &shareWatch{cancel: cancel, paths: map[string]struct{}{}, shares: status}
	r.mu.Lock()
	r.run = sw
	r.mu.Unlock()
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
		sw.sendLoop(ctx, r.cfg.Current, r.cfg.Paused)
		w.Close()
	}()
}

// Stop ends the watch.
func (r *ShareRelay) Stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	sw := r.run
	r.run = nil
	r.mu.Unlock()
	if sw != nil {
		sw.cancel()
	}
}

// Status is what each share's watch covers, and the watch's problems
// (its cap hit), for the host agent's status; nil while not running.
func (r *ShareRelay) Status() (shares []control.ShareWatch, problems []string) {
	if r == nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.run == nil {
		return nil, nil
	}
	if r.run.capped() {
		problems = append(problems, capProblem)
	}
	return r.run.status(), problems
}

// watchLeftOut are the host folders no share watch covers: vmdock's home
// (the instance folders: VM disks, the host agent's logs), the image cache
// and the OS's busy folders in the user's home.
func watchLeftOut(instanceDir string) []watchscope.Folder {
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
	return watchscope.Defaults(home, filepath.Dir(instanceDir), cache)
}

// shareTrees are the trees to watch for shares, and what status says of
// each share: a share with inotify on is watched less its excludes and
// the left-out folders inside it, unless off says why this build watches
// no share.
func shareTrees(shares []mounts.Share, leftOut []watchscope.Folder, off string) ([]watch.Tree, []control.ShareWatch) {
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
	if len(sw.paths) >= maxQueued {
		return
	}
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
func (sw *shareWatch) sendLoop(ctx context.Context, current func() *agent.Client, paused func() bool) {
	t := time.NewTicker(touchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if paused != nil && paused() {
			continue
		}
		paths := sw.take()
		for len(paths) > 0 {
			n := min(len(paths), 4096)
			if c := current(); c != nil {
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
