package guest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/disks"
	"github.com/vmdock/vmdock/agent/guest/dnsforward"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func TestMount(t *testing.T) {
	s, fos := newTestServer(t)
	mi := filepath.Join(s.Root, "proc/self/mountinfo")
	m := agent.MountRequest{Type: "9p", Tag: "share0", Target: "/home/me/my project", ReadOnly: true}
	must(t, s.mount(context.Background(), m))
	if want := "mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap,ro share0 /home/me/my project"; fos.Ran() != want {
		t.Fatalf("ran %q, want %q", fos.Ran(), want)
	}
	if _, err := os.Stat(filepath.Join(s.Root, m.Target)); err != nil {
		t.Fatalf("mount point not created: %v", err)
	}
	// Once mounted (note the kernel's \040 for the space) it is a no-op.
	must(t, os.WriteFile(mi, []byte("30 22 0:40 / /home/me/my\\040project ro - 9p share0 ro\n"), 0o644))
	must(t, s.mount(context.Background(), m))
	if n := strings.Count(fos.Ran(), "mount"); n != 1 {
		t.Fatalf("mounted again: %s", fos.Ran())
	}
	for _, bad := range []agent.MountRequest{
		{Type: "nfs", Tag: "t", Target: "/x"},
		{Type: "9p", Tag: "", Target: "/x"},
		{Type: "9p", Tag: "t", Target: "relative"},
		{Type: "9p", Tag: "t", Target: "/"},
	} {
		if err := s.mount(context.Background(), bad); err == nil {
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
	must(t, s.mount(context.Background(), m))
	if n := strings.Count(fos.Ran(), "mount -t 9p"); n != 4 {
		t.Fatalf("mount ran %d times, want 4 (3 failures, then success):\n%s", n, fos.Ran())
	}

	mountRetryFor = 100 * time.Millisecond
	fos.FailFirst = map[string]int{"mount": 1 << 20}
	err := s.mount(context.Background(), agent.MountRequest{Type: "9p", Tag: "missing", Target: "/other"})
	if err == nil || !strings.Contains(err.Error(), "mount missing on /other (") {
		t.Fatalf("a tag that never appears: %v", err)
	}
}

func TestSetup(t *testing.T) {
	s, fos := newTestServer(t)
	fos.Results = map[string]error{"blkid": guestostest.ExitErr(2)}
	leases := filepath.Join(s.Root, dnsforward.LeasesDir)
	must(t, os.MkdirAll(leases, 0o755))
	must(t, os.WriteFile(filepath.Join(leases, "2"), []byte("ADDRESS=10.0.2.15\nDNS=10.0.2.3\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(s.Root, "etc/hosts"), []byte("127.0.0.1 localhost\n127.0.1.1 old\n"), 0o644))
	err := s.setup(context.Background(), agent.Setup{
		Hostname: "vmdock", Env: map[string]string{"A": "1 2"}, TimeUnixNs: 5, GrowRoot: true,
		DataDisk: "/dev/vdb", HostAccessIP: "10.254.254.254",
	})
	must(t, err)
	defer s.hostAccess.Close()
	ran := fos.Ran()
	for _, want := range []string{
		"resize2fs /dev/vda", "mkfs.ext4 -q -E lazy_itable_init=0 -L vmdock-data /dev/vdb",
		"mount -t ext4 /dev/vdb /var/lib/vmdock-data", "mount --bind /var/lib/vmdock-data/docker /var/lib/docker",
		"ip addr replace 10.254.254.254/32 dev lo", "iptables -t nat -S",
		"iptables-restore --noflush " + filepath.Join(s.Root, hostAccessRules),
	} {
		if !strings.Contains(ran, want) {
			t.Errorf("missing command %q in:\n%s", want, ran)
		}
	}
	rules, _ := os.ReadFile(filepath.Join(s.Root, hostAccessRules))
	for _, want := range []string{"-I OUTPUT 1 -j VMDOCK-HOST\n", "-I PREROUTING 1 -j VMDOCK-HOST\n", "-d 10.254.254.254 -j REDIRECT --to-ports "} {
		if !strings.Contains(string(rules), want) {
			t.Errorf("missing rule %q in:\n%s", want, rules)
		}
	}
	files := map[string]string{
		"etc/resolv.conf": "nameserver 10.0.2.3\n", "etc/environment": "A=\"1 2\"\n",
		"etc/hosts": "127.0.1.1\tvmdock\n10.254.254.254\thost.docker.internal\n",
	}
	for f, want := range files {
		b, _ := os.ReadFile(filepath.Join(s.Root, f))
		if !strings.Contains(string(b), want) {
			t.Errorf("%s = %q, want it to contain %q", f, b, want)
		}
	}
	if got := strings.Join(fos.SyscallMounts, " "); got != "/var/lib/vmdock-data /var/lib/docker /var/lib/containerd" {
		t.Errorf("data disk mounts made with mount(2): %q, want all three", got)
	}
	if fos.Hostname != "vmdock" {
		t.Errorf("kernel host name set to %q, want vmdock", fos.Hostname)
	}
	if strings.Contains(ran, "hostname") {
		t.Errorf("a process was run for the host name:\n%s", ran)
	}
	if b, _ := os.ReadFile(filepath.Join(s.Root, "etc/hosts")); strings.Contains(string(b), "old") {
		t.Errorf("old hostname kept: %s", b)
	}
	for _, bad := range []agent.Setup{{Hostname: "bad_name!"}, {DNS: []string{"dns.example"}}, {Env: map[string]string{"1X": "y"}}, {HostAccessIP: "::1"}} {
		if err := s.setup(context.Background(), bad); err == nil {
			t.Errorf("setup %+v: want an error", bad)
		}
	}
}

// Excluded subfolders are bound from the data disk over the share, after
// the share; a repeated request binds nothing twice, and a path leaving
// the share is refused before anything is mounted.
func TestMountExcludes(t *testing.T) {
	s, fos := newTestServer(t)
	mi := filepath.Join(s.Root, "proc/self/mountinfo")
	m := agent.MountRequest{Type: "virtiofs", Tag: "vmdock0", Target: "/src/app", HostPath: "/src/app", Exclude: []string{"node_modules", "web/vendor"}}
	must(t, s.mount(context.Background(), m))
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
	must(t, s.mount(context.Background(), m))
	if fos.Ran() != before {
		t.Fatalf("repeated request ran %q", strings.TrimPrefix(fos.Ran(), before))
	}
	// Another share keeps its own store.
	if other := excludeStore("/src/other", "/src/other"); other == store {
		t.Fatal("two shares share one exclude store")
	}
	for _, bad := range []string{"../etc", "/etc", "a/../../b", ".", ""} {
		s2, fos2 := newTestServer(t)
		err := s2.mount(context.Background(), agent.MountRequest{Type: "9p", Tag: "t", Target: "/x", Exclude: []string{bad}})
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
	if err := s.mount(context.Background(), m); err == nil || !strings.Contains(err.Error(), "data disk is not mounted") || fos.Ran() != "" {
		t.Fatalf("without the data disk: %v, ran %q", err, fos.Ran())
	}
	mi := filepath.Join(s.Root, "proc/self/mountinfo")
	must(t, os.WriteFile(mi, []byte("22 1 254:0 / / rw - ext4 /dev/vda rw\n23 22 254:16 / /var/lib/vmdock-data rw - ext4 /dev/vdb rw\n"), 0o644))
	must(t, s.mount(context.Background(), m))
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
		if err := s2.mount(context.Background(), agent.MountRequest{Type: agent.MountTypeSync, Tag: bad, Target: "/x"}); err == nil {
			t.Errorf("sync id %q accepted", bad)
		}
	}
}

// The sync service needs the data disk too: the engine's state and the
// copies must live on the same disk.
func TestSyncRefusedWithoutDataDisk(t *testing.T) {
	s, _ := newTestServer(t)
	c, _ := connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.OpenSync(ctx); err == nil || !strings.Contains(err.Error(), "data disk is not mounted") {
		t.Fatalf("OpenSync without the data disk: %v", err)
	}
}

// The sync-watch stream names the sync mount whose guest copy changed,
// once per burst, and nothing for its excluded folders.
func TestSyncWatchReportsChangedCopies(t *testing.T) {
	s, _ := newTestServer(t)
	for _, d := range []string{"s1", "s2", "s2/node_modules"} {
		must(t, os.MkdirAll(filepath.Join(s.Root, agent.GuestSyncDir, d), 0o755))
	}
	c, _ := connect(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan string, 10)
	go c.WatchSync(ctx, agent.SyncWatch{Mounts: []agent.SyncWatchMount{{ID: "s1"}, {ID: "s2", Exclude: []string{"node_modules"}}}}, func(id string) { got <- id })
	time.Sleep(300 * time.Millisecond) // the watch is set up after the request
	must(t, os.WriteFile(filepath.Join(s.Root, agent.GuestSyncDir, "s2/node_modules/x"), []byte("x"), 0o644))
	for i := 0; i < 20; i++ {
		must(t, os.WriteFile(filepath.Join(s.Root, agent.GuestSyncDir, "s2", fmt.Sprintf("f%d", i)), []byte("x"), 0o644))
	}
	select {
	case id := <-got:
		if id != "s2" {
			t.Fatalf("change reported for %q, want s2", id)
		}
	case <-ctx.Done():
		t.Fatal("no change reported")
	}
	select {
	case id := <-got:
		t.Fatalf("a second report (%q) for one burst", id)
	case <-time.After(400 * time.Millisecond):
	}
}

// touch keeps a file's times as they are (so nothing changes for the
// file), skips paths that are gone, and refuses paths that are not clean
// and absolute.
func TestTouch(t *testing.T) {
	s, _ := newTestServer(t)
	f := filepath.Join(s.Root, "src/app/x.js")
	must(t, os.MkdirAll(filepath.Dir(f), 0o755))
	must(t, os.WriteFile(f, []byte("x"), 0o644))
	old := time.Date(2020, 1, 2, 3, 4, 5, 600, time.UTC)
	must(t, os.Chtimes(f, old, old))
	must(t, s.touch([]string{"/src/app/x.js", "/src/app/gone.js", "/src/app"}))
	fi, err := os.Stat(f)
	if err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("mtime after touch: %v, %v; want %v kept", fi.ModTime(), err, old)
	}
	for _, bad := range [][]string{{"relative"}, {"/a/../b"}, {"/"}} {
		if err := s.touch(bad); err == nil {
			t.Errorf("touch %q accepted", bad)
		}
	}
}

// A 9p share's cache mode reaches the mount options; an unknown one is
// refused before mounting.
func TestMount9pCache(t *testing.T) {
	s, fos := newTestServer(t)
	must(t, s.mount(context.Background(), agent.MountRequest{Type: "9p", Tag: "vmdock1", Target: "/src", Cache: "loose"}))
	if !strings.Contains(fos.Ran(), "cache=loose ") {
		t.Fatalf("ran %q, want cache=loose", fos.Ran())
	}
	s2, fos2 := newTestServer(t)
	if err := s2.mount(context.Background(), agent.MountRequest{Type: "9p", Tag: "vmdock1", Target: "/src", Cache: "fscache"}); err == nil || fos2.Ran() != "" {
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
		err := s.mount(context.Background(), m)
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
