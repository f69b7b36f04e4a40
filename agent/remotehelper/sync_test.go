package remotehelper

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
)

func newSyncState(t *testing.T) (*syncState, string) {
	root := t.TempDir()
	cache := filepath.Join(root, "home", ".cache", "vmdock")
	return &syncState{dir: SyncDir(cache, "big-0123abcd"), cache: cache}, root
}

// oneLine fails the test unless err is a one-line error containing each
// of wants.
func oneLine(t *testing.T, what string, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted; want it refused", what)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("%s: %q is more than one line", what, err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}

// A folder the instance made or found empty becomes its copy, and stays
// its copy once it holds files; a folder with files vmdock never synced
// is refused and left as it was.
func TestSyncFolderIsClaimedOnlyWhenNewOrEmpty(t *testing.T) {
	s, root := newSyncState(t)
	app := filepath.Join(root, "Users", "alice", "src", "app")
	if err := s.claimFolder("s1", app, os.MkdirAll); err != nil {
		t.Fatalf("a missing folder: %v", err)
	}
	if fi, err := os.Stat(app); err != nil || !fi.IsDir() {
		t.Fatalf("the missing folder was not made: %v", err)
	}
	writeTestFile(t, filepath.Join(app, "main.go"), "package main")
	if err := s.claimFolder("s1", app, os.MkdirAll); err != nil {
		t.Errorf("the instance's own folder, now with files: %v", err)
	}

	taken := filepath.Join(root, "srv", "app")
	writeTestFile(t, filepath.Join(taken, "server-only.txt"), "keep me")
	err := s.claimFolder("s2", taken, os.MkdirAll)
	oneLine(t, "a folder with the server's own files", err, taken, "did not sync", "mv "+taken+" "+taken+".old", "nothing was changed")
	if b, _ := os.ReadFile(filepath.Join(taken, "server-only.txt")); string(b) != "keep me" {
		t.Errorf("the refused folder's file now holds %q", b)
	}
	// The same mount moved to a folder with files it never synced.
	oneLine(t, "s1 moved onto the server's files", s.claimFolder("s1", taken, os.MkdirAll), "did not sync")

	empty := filepath.Join(root, "srv", "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.claimFolder("s3", empty, os.MkdirAll); err != nil {
		t.Errorf("an empty folder: %v", err)
	}
	if got := s.claimed("s3"); got != empty {
		t.Errorf("the claim of s3 names %q; want %q", got, empty)
	}
}

func TestSyncFolderRefusesWhatIsNoFolder(t *testing.T) {
	s, root := newSyncState(t)
	file := filepath.Join(root, "notes.txt")
	writeTestFile(t, file, "x")
	oneLine(t, "a file", s.claimFolder("s1", file, os.MkdirAll), file, "is a file", "another folder")
	link := filepath.Join(root, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	oneLine(t, "a symbolic link", s.claimFolder("s1", link, os.MkdirAll), link, "symbolic link", "-V PATH:"+root)
	oneLine(t, "vmdock's own folder", s.claimFolder("s1", filepath.Join(s.cache, "sync"), os.MkdirAll), "vmdock's own folder")
	oneLine(t, "the home holding vmdock's folder", s.claimFolder("s1", filepath.Join(root, "home"), os.MkdirAll), "vmdock's own folder")
	oneLine(t, "the root", s.claimFolder("s1", "/", os.MkdirAll), `"/"`, "accepted: an absolute clean path")
	oneLine(t, "a relative path", s.claimFolder("s1", "src/app", os.MkdirAll), "src/app", "accepted")
	oneLine(t, "an unclean path", s.claimFolder("s1", root+"/a/../b", os.MkdirAll), "accepted")
	oneLine(t, "a bad id", s.claimFolder("../x", filepath.Join(root, "new"), os.MkdirAll), `"../x"`)
	if _, err := os.Stat(filepath.Join(root, "new")); err == nil {
		t.Error("a refused request made its folder")
	}
}

// A folder the SSH user may not create (a Mac's /Users/alice on a Linux
// server) is one line with the commands that make it.
func TestSyncFolderTheUserMayNotCreate(t *testing.T) {
	s, root := newSyncState(t)
	app := filepath.Join(root, "Users", "alice", "src", "app")
	denied := func(string, fs.FileMode) error {
		return &fs.PathError{Op: "mkdir", Path: filepath.Join(root, "Users"), Err: syscall.EACCES}
	}
	u := sshUser()
	oneLine(t, "mkdir denied", s.claimFolder("s1", app, denied), app, "may not create", "sudo mkdir -p "+app+" && sudo chown "+u+": "+app)
	if s.claimed("s1") != "" {
		t.Error("a folder that could not be made was claimed")
	}
	other := func(string, fs.FileMode) error { return &fs.PathError{Op: "mkdir", Path: app, Err: syscall.EROFS} }
	oneLine(t, "a read-only file system", s.claimFolder("s1", app, other), app, "read-only file system", "another folder")
	if os.Geteuid() == 0 {
		return // root may write anywhere: the real refusals below need another user
	}
	ro := filepath.Join(root, "ro")
	if err := os.MkdirAll(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	oneLine(t, "a real read-only parent", s.claimFolder("s1", filepath.Join(ro, "app"), os.MkdirAll), "sudo mkdir -p")
	oneLine(t, "a folder the user may not write", s.claimFolder("s1", ro, os.MkdirAll), "may not write", "sudo chown -R")
}

// Through the agent protocol: the mount request makes the folder, the
// watch reports a change in it, and a helper without sync state refuses.
func TestHelperServesSyncMounts(t *testing.T) {
	_, sock := startFakeEngine(t)
	root := t.TempDir()
	cache := filepath.Join(root, ".cache", "vmdock")
	c := connect(t, Options{Socket: sock, Cache: cache, SyncKey: "big-0123abcd"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	app := filepath.Join(root, "src", "app")
	if err := c.Mount(ctx, agent.MountRequest{Type: agent.MountTypeSync, Tag: "s1", Target: app, HostPath: "/Users/alice/src/app"}); err != nil {
		t.Fatalf("sync mount request: %v", err)
	}
	if _, err := os.Stat(app); err != nil {
		t.Fatalf("the mount request did not make the folder: %v", err)
	}
	if err := c.Mount(ctx, agent.MountRequest{Type: "virtiofs", Tag: "vmdock0", Target: app}); err == nil || !strings.Contains(err.Error(), "sync mounts only") {
		t.Errorf("a share mount on a server: %v; want it refused", err)
	}
	changed := make(chan string, 8)
	go c.WatchSync(ctx, agent.SyncWatch{Mounts: []agent.SyncWatchMount{{ID: "s1"}}}, func(id string) { changed <- id })
	// The watch is up once its first report arrives; keep writing until then.
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		writeTestFile(t, filepath.Join(app, "from-container.txt"), strings.Repeat("x", i))
		select {
		case id := <-changed:
			if id != "s1" {
				t.Fatalf("the watch reported %q; want s1", id)
			}
			return
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("no change reported for a file written in the server's folder")
		}
	}
}

func TestHelperWithoutSyncKeyRefusesSync(t *testing.T) {
	_, sock := startFakeEngine(t)
	c := connect(t, Options{Socket: sock})
	ctx := context.Background()
	if _, err := c.OpenSync(ctx); err == nil || !strings.Contains(err.Error(), "--sync-key") {
		t.Errorf("sync stream without a sync key: %v; want it refused", err)
	}
	err := c.WatchSync(ctx, agent.SyncWatch{Mounts: []agent.SyncWatchMount{{ID: "s1"}}}, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "--sync-key") {
		t.Errorf("sync watch without a sync key: %v; want it refused", err)
	}
}

func TestSyncWatchNeedsTheMountRequestFirst(t *testing.T) {
	_, sock := startFakeEngine(t)
	c := connect(t, Options{Socket: sock, Cache: filepath.Join(t.TempDir(), "cache"), SyncKey: "k"})
	err := c.WatchSync(context.Background(), agent.SyncWatch{Mounts: []agent.SyncWatchMount{{ID: "s9"}}}, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "mount request comes first") {
		t.Errorf("a watch of a mount never requested: %v", err)
	}
}

func writeTestFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
