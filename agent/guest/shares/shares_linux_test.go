package shares

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/disks"
)

func TestMount(t *testing.T) {
	s, fos := newTestServer(t)
	mi := filepath.Join(s.Root, "proc/self/mountinfo")
	m := agent.MountRequest{Type: "9p", Tag: "share0", Target: "/home/me/my project", ReadOnly: true}
	must(t, s.Mount(context.Background(), m))
	if want := "mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap,ro share0 /home/me/my project"; fos.Ran() != want {
		t.Fatalf("ran %q, want %q", fos.Ran(), want)
	}
	if _, err := os.Stat(filepath.Join(s.Root, m.Target)); err != nil {
		t.Fatalf("mount point not created: %v", err)
	}
	// Once mounted (note the kernel's \040 for the space) it is a no-op.
	must(t, os.WriteFile(mi, []byte("30 22 0:40 / /home/me/my\\040project ro - 9p share0 ro\n"), 0o644))
	must(t, s.Mount(context.Background(), m))
	if n := strings.Count(fos.Ran(), "mount"); n != 1 {
		t.Fatalf("mounted again: %s", fos.Ran())
	}
	for _, bad := range []agent.MountRequest{
		{Type: "nfs", Tag: "t", Target: "/x"},
		{Type: "9p", Tag: "", Target: "/x"},
		{Type: "9p", Tag: "t", Target: "relative"},
		{Type: "9p", Tag: "t", Target: "/"},
	} {
		if err := s.Mount(context.Background(), bad); err == nil {
			t.Errorf("mount %+v: want an error", bad)
		}
	}
}

func TestMountRetriesWhileTheDeviceBinds(t *testing.T) {
	defer func(f, e time.Duration) { mountRetryFor, mountRetryEvery = f, e }(mountRetryFor, mountRetryEvery)
	mountRetryFor, mountRetryEvery = 2*time.Second, 10*time.Millisecond
	s, fos := newTestServer(t)
	fos.FailFirst = map[string]int{"mount": 3}
	m := agent.MountRequest{Type: "9p", Tag: "share0", Target: "/src"}
	must(t, s.Mount(context.Background(), m))
	if n := strings.Count(fos.Ran(), "mount -t 9p"); n != 4 {
		t.Fatalf("mount ran %d times, want 4 (3 failures, then success):\n%s", n, fos.Ran())
	}

	mountRetryFor = 100 * time.Millisecond
	fos.FailFirst = map[string]int{"mount": 1 << 20}
	err := s.Mount(context.Background(), agent.MountRequest{Type: "9p", Tag: "missing", Target: "/other"})
	if err == nil || !strings.Contains(err.Error(), "mount missing on /other (") {
		t.Fatalf("a tag that never appears: %v", err)
	}
}

// Excluded subfolders are bound from the data disk over the share, after
// the share; a repeated request binds nothing twice, and a path leaving
// the share is refused before anything is mounted.
func TestMountExcludes(t *testing.T) {
	s, fos := newTestServer(t)
	mi := filepath.Join(s.Root, "proc/self/mountinfo")
	m := agent.MountRequest{Type: "virtiofs", Tag: "vmdock0", Target: "/src/app", HostPath: "/src/app", Exclude: []string{"node_modules", "web/vendor"}}
	must(t, s.Mount(context.Background(), m))
	store := excludeStore("/src/app", "/src/app")
	if !strings.HasPrefix(store, "/var/lib/vmdock-data/excludes/") {
		t.Fatalf("excludes stored at %s, want on the data disk", store)
	}
	want := "mount -t virtiofs vmdock0 /src/app\n" +
		"mount --bind " + store + "/node_modules /src/app/node_modules\n" +
		"mount --bind " + store + "/web/vendor /src/app/web/vendor"
	if got := strings.TrimSpace(fos.Ran()); got != want {
		t.Fatalf("ran:\n%s\nwant:\n%s", got, want)
	}
	for _, p := range []string{store + "/web/vendor", "/src/app/web/vendor"} {
		if fi, err := os.Stat(filepath.Join(s.Root, p)); err != nil || !fi.IsDir() {
			t.Fatalf("%s not created: %v", p, err)
		}
	}
	// Mounted now: a reconnecting host repeats the request, nothing runs.
	must(t, os.WriteFile(mi, []byte("30 22 0:40 / /src/app rw - virtiofs vmdock0 rw\n"+
		"31 30 254:16 /excludes/x/node_modules /src/app/node_modules rw - ext4 /dev/vdb rw\n"+
		"32 30 254:16 /excludes/x/web/vendor /src/app/web/vendor rw - ext4 /dev/vdb rw\n"), 0o644))
	before := fos.Ran()
	must(t, s.Mount(context.Background(), m))
	if fos.Ran() != before {
		t.Fatalf("repeated request ran %q", strings.TrimPrefix(fos.Ran(), before))
	}
	// Another share keeps its own store.
	if other := excludeStore("/src/other", "/src/other"); other == store {
		t.Fatal("two shares share one exclude store")
	}
	for _, bad := range []string{"../etc", "/etc", "a/../../b", ".", ""} {
		s2, fos2 := newTestServer(t)
		err := s2.Mount(context.Background(), agent.MountRequest{Type: "9p", Tag: "t", Target: "/x", Exclude: []string{bad}})
		if err == nil || fos2.Ran() != "" {
			t.Errorf("exclude %q: err %v, ran %q; want a refusal before any mount", bad, err, fos2.Ran())
		}
	}
}

// A sync mount binds its guest copy from the data disk at the target,
// creating the copy owned by the host user; without the data disk it is
// refused, since the copy would end up hidden under it.
func TestMountSyncCopy(t *testing.T) {
	s, fos := newTestServer(t)
	m := agent.MountRequest{Type: agent.MountTypeSync, Tag: "s0123abcd", Target: "/home/me/app", UID: os.Getuid(), GID: os.Getgid()}
	if err := s.Mount(context.Background(), m); err == nil || !strings.Contains(err.Error(), "data disk is not mounted") || fos.Ran() != "" {
		t.Fatalf("without the data disk: %v, ran %q", err, fos.Ran())
	}
	mi := filepath.Join(s.Root, "proc/self/mountinfo")
	must(t, os.WriteFile(mi, []byte("22 1 254:0 / / rw - ext4 /dev/vda rw\n23 22 254:16 / /var/lib/vmdock-data rw - ext4 /dev/vdb rw\n"), 0o644))
	must(t, s.Mount(context.Background(), m))
	if want := "mount --bind /var/lib/vmdock-data/sync/s0123abcd /home/me/app"; strings.TrimSpace(fos.Ran()) != want {
		t.Fatalf("ran %q, want %q", fos.Ran(), want)
	}
	if !strings.HasPrefix(agent.GuestSyncDir, disks.DataMount+"/") {
		t.Fatalf("GuestSyncDir %s is not on the data disk (%s)", agent.GuestSyncDir, disks.DataMount)
	}
	fi, err := os.Stat(filepath.Join(s.Root, "/var/lib/vmdock-data/sync/s0123abcd"))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Fatalf("guest copy: %v, %v", fi, err)
	}
	for _, bad := range []string{"../x", "S1", ""} {
		s2, _ := newTestServer(t)
		if err := s2.Mount(context.Background(), agent.MountRequest{Type: agent.MountTypeSync, Tag: bad, Target: "/x"}); err == nil {
			t.Errorf("sync id %q accepted", bad)
		}
	}
}

// Touch keeps a file's times as they are (so nothing changes for the
// file), skips paths that are gone, and refuses paths that are not clean
// and absolute.
func TestTouch(t *testing.T) {
	s, _ := newTestServer(t)
	f := filepath.Join(s.Root, "src/app/x.js")
	must(t, os.MkdirAll(filepath.Dir(f), 0o755))
	must(t, os.WriteFile(f, []byte("x"), 0o644))
	old := time.Date(2020, 1, 2, 3, 4, 5, 600, time.UTC)
	must(t, os.Chtimes(f, old, old))
	must(t, s.Touch([]string{"/src/app/x.js", "/src/app/gone.js", "/src/app"}))
	fi, err := os.Stat(f)
	if err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("mtime after touch: %v, %v; want %v kept", fi.ModTime(), err, old)
	}
	for _, bad := range [][]string{{"relative"}, {"/a/../b"}, {"/"}} {
		if err := s.Touch(bad); err == nil {
			t.Errorf("touch %q accepted", bad)
		}
	}
}

// A 9p share's cache mode reaches the mount options; an unknown one is
// refused before mounting.
func TestMount9pCache(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, s.Mount(context.Background(), agent.MountRequest{Type: "9p", Tag: "vmdock1", Target: "/src", Cache: "loose"}))
	if !strings.Contains(fos.Ran(), "cache=loose ") {
		t.Fatalf("ran %q, want cache=loose", fos.Ran())
	}
	s2, fos2 := newTestServer(t)
	if err := s2.Mount(context.Background(), agent.MountRequest{Type: "9p", Tag: "vmdock1", Target: "/src", Cache: "fscache"}); err == nil || fos2.Ran() != "" {
		t.Fatalf("cache fscache: %v, ran %q", err, fos2.Ran())
	}
}

// An exclude's mount point is created in the share; when that fails on a
// read-only share the error says where the folder has to be made.
func TestMountExcludeMountPointFails(t *testing.T) {
	for _, ro := range []bool{true, false} {
		s, fos := newTestServer(t)
		must(t, os.MkdirAll(filepath.Join(s.Root, "src/app"), 0o755))
		// A file where the mount point should be: no folder can be made there.
		must(t, os.WriteFile(filepath.Join(s.Root, "src/app/node_modules"), nil, 0o644))
		m := agent.MountRequest{Type: "virtiofs", Tag: "vmdock0", Target: "/src/app", HostPath: "/src/app", ReadOnly: ro, Exclude: []string{"node_modules"}}
		err := s.Mount(context.Background(), m)
		if err == nil || !strings.Contains(err.Error(), "exclude node_modules: create its mount point in the share") {
			t.Fatalf("read-only %v: %v", ro, err)
		}
		hint := strings.Contains(err.Error(), "the share is read-only: create the folder on the host")
		if hint != ro {
			t.Errorf("read-only %v: error %q; want the read-only hint only for a read-only share", ro, err)
		}
		if strings.Contains(fos.Ran(), "--bind") {
			t.Errorf("read-only %v: bound without a mount point: %s", ro, fos.Ran())
		}
	}
}
