package filesync

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/mounts/watch"
	"github.com/vmdock/vmdock/vm/control"
)

// sharedHome is a home folder shared whole, with vmdock's home and the
// image cache inside it, as by default; instDir is the instance folder.
func sharedHome(t *testing.T) (home, instDir string) {
	t.Helper()
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".vmdock/default", ".cache/vmdock/blobs", "app/node_modules", "app/src"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("VMDOCK_CACHE", filepath.Join(home, ".cache", "vmdock"))
	return home, filepath.Join(home, ".vmdock", "default")
}

// A shared home is watched without vmdock's home and the image cache in
// it, on top of the share's own excludes; status says so. Shares with
// inotify off, or a build that cannot watch, watch nothing.
func TestShareTreesLeaveOutVMDockFolders(t *testing.T) {
	home, instDir := sharedHome(t)
	shares := []mounts.Share{
		{Tag: "vmdock0", HostPath: home, GuestPath: "/home/u", Exclude: []string{"app/node_modules"}, Inotify: true},
		{Tag: "vmdock1", HostPath: "/srv", GuestPath: "/srv", Inotify: false},
	}
	trees, status := shareTrees(shares, watchLeftOut(instDir), "")
	wantTrees := []watch.Tree{{ID: "vmdock0", Dir: home, Exclude: []string{"app/node_modules", ".cache/vmdock", ".vmdock"}}}
	if !reflect.DeepEqual(trees, wantTrees) {
		t.Errorf("trees = %+v\nwant %+v", trees, wantTrees)
	}
	var left []string
	for _, l := range status[0].LeftOut {
		left = append(left, l.Path)
		if l.Why == "" {
			t.Errorf("%s left out without a why", l.Path)
		}
	}
	wantLeft := []string{filepath.Join(home, "app/node_modules"), filepath.Join(home, ".cache/vmdock"), filepath.Join(home, ".vmdock")}
	if !slices.Equal(left, wantLeft) || status[0].Watch != watch.Backend {
		t.Errorf("status of the shared home = %+v; want %s watching, left out %q", status[0], watch.Backend, wantLeft)
	}
	if st := status[1]; st.Watch != "off" || st.Off == "" || st.LeftOut != nil {
		t.Errorf("status of an inotify: false share = %+v", st)
	}

	trees, status = shareTrees(shares, watchLeftOut(instDir), "no watcher in this build")
	if len(trees) != 0 || status[0].Watch != "off" || status[0].Off != "no watcher in this build" {
		t.Errorf("a build that cannot watch: trees %+v, status %+v", trees, status)
	}
}

// The watcher the trees go to reports nothing of vmdock's own writes (the
// host agent's log, a download into the cache) and still reports the
// user's edits.
func TestShareWatchIgnoresVMDockWrites(t *testing.T) {
	home, instDir := sharedHome(t)
	trees, _ := shareTrees([]mounts.Share{{Tag: "vmdock0", HostPath: home, GuestPath: "/home/u", Inotify: true}}, watchLeftOut(instDir), "")
	var mu sync.Mutex
	var seen []string
	w, err := watch.New(trees, watch.Options{OnPath: func(_, p string, _ watch.Op) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	time.Sleep(100 * time.Millisecond) // FSEvents starts reporting a moment after its stream starts
	for _, p := range []string{".vmdock/default/hostagent.log", ".vmdock/default/new/disk.raw", ".cache/vmdock/blobs/x", "app/src/main.go"} {
		os.MkdirAll(filepath.Dir(filepath.Join(home, p)), 0o755)
		if err := os.WriteFile(filepath.Join(home, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit := filepath.Join(home, "app/src/main.go")
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(seen)
		mu.Unlock()
		if slices.Contains(got, edit) {
			time.Sleep(200 * time.Millisecond) // let any late event of the left-out folders come
			mu.Lock()
			got = slices.Clone(seen)
			mu.Unlock()
			for _, p := range got {
				if rel, _ := filepath.Rel(home, p); strings.HasPrefix(rel, ".vmdock") || strings.HasPrefix(rel, ".cache/vmdock") {
					t.Errorf("a write in a left-out folder was reported: %s", p)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the user's edit was not reported; seen %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// status carries each share's watch, with the watcher's cap.
func TestShareWatchStatus(t *testing.T) {
	sw := &shareWatch{shares: []control.ShareWatch{{HostPath: "/a", Watch: "inotify"}, {HostPath: "/b", Watch: "off"}}}
	got := sw.status()
	if len(got) != 2 || got[0].Capped || got[1].Capped {
		t.Errorf("status = %+v", got)
	}
	got[0].HostPath = "/changed"
	if sw.shares[0].HostPath != "/a" {
		t.Error("status hands out the watch's own slice")
	}
}

// The relay reports its shares only between Start and Stop, as the host
// agent's status showed them before; a nil relay never runs.
func TestShareRelayStatusWhileRunning(t *testing.T) {
	r := NewShareRelay(ShareConfig{
		Shares:      []mounts.Share{{Tag: "vmdock0", HostPath: "/srv", GuestPath: "/srv", Inotify: false}},
		InstanceDir: filepath.Join(t.TempDir(), "default"),
	})
	if sh, probs := r.Status(); sh != nil || probs != nil {
		t.Fatalf("status before Start: %+v %q", sh, probs)
	}
	r.Start()
	sh, probs := r.Status()
	if len(sh) != 1 || sh[0].Watch != "off" || probs != nil {
		t.Fatalf("status while running: %+v %q", sh, probs)
	}
	r.Stop()
	if sh, _ := r.Status(); sh != nil {
		t.Fatalf("status after Stop: %+v", sh)
	}
	var none *ShareRelay
	none.Start()
	none.Stop()
	if sh, probs := none.Status(); sh != nil || probs != nil {
		t.Fatalf("a nil relay's status: %+v %q", sh, probs)
	}
}
