package guestos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recordingOS records the mount(8) commands it is asked to run.
type recordingOS struct{ ran []string }

func (r *recordingOS) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.ran = append(r.ran, strings.Join(append([]string{name}, args...), " "))
	return nil, nil
}
func (r *recordingOS) SetClock(time.Time) error           { return nil }
func (r *recordingOS) SetHostname(string) error           { return nil }
func (r *recordingOS) Mount(_, _, _ string, _ bool) error { return nil }

func testSys(t *testing.T, mountinfo string) (Sys, *recordingOS) {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/self"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/self/mountinfo"), []byte(mountinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recordingOS{}
	return Sys{OS: r, Root: root}, r
}

// The mount table's octal escapes are undone (a share with a space in its
// path), lines without the separator are skipped, and the last mount on a
// target is the visible one.
func TestMountedAt(t *testing.T) {
	s, _ := testSys(t, "22 1 254:0 / / rw - ext4 /dev/vda rw\n"+
		"30 22 0:40 / /src/my\\040project rw - virtiofs vmdock0 rw\n"+
		"garbage without a separator\n"+
		"31 22 254:16 / /data rw - ext4 /dev/vdb rw\n"+
		"32 31 0:41 / /data rw - tmpfs tmpfs rw\n")
	if m, ok, err := s.MountedAt("/src/my project"); err != nil || !ok || m.FSType != "virtiofs" || m.Source != "vmdock0" {
		t.Fatalf("share with a space: %+v %v %v", m, ok, err)
	}
	if m, ok, _ := s.MountedAt("/data"); !ok || m.FSType != "tmpfs" {
		t.Fatalf("/data: %+v, want the last mount (tmpfs)", m)
	}
	if _, ok, _ := s.MountedAt("/nowhere"); ok {
		t.Fatal("/nowhere reported mounted")
	}
	if _, _, err := (Sys{Root: t.TempDir()}).MountedAt("/"); err == nil {
		t.Fatal("no mount table: want an error")
	}
}

// MountOnce mounts only what is not mounted, creating the mount point.
func TestMountOnce(t *testing.T) {
	s, r := testSys(t, "22 1 254:0 / / rw - ext4 /dev/vda rw\n30 22 0:40 / /mnt/here rw - 9p t rw\n")
	if err := s.MountOnce(context.Background(), "/mnt/here", "-t", "9p", "t", "/mnt/here"); err != nil || len(r.ran) != 0 {
		t.Fatalf("mounted target: %v, ran %q", err, r.ran)
	}
	if err := s.MountOnce(context.Background(), "/mnt/new", "-t", "9p", "u", "/mnt/new"); err != nil {
		t.Fatal(err)
	}
	if len(r.ran) != 1 || r.ran[0] != "mount -t 9p u /mnt/new" {
		t.Fatalf("ran %q", r.ran)
	}
	if fi, err := os.Stat(s.Path("/mnt/new")); err != nil || !fi.IsDir() {
		t.Fatalf("mount point not made: %v", err)
	}
}

// EditHosts replaces the line for a key, keeps the others, and appends a
// key that has none.
func TestEditHosts(t *testing.T) {
	s, _ := testSys(t, "")
	if err := os.MkdirAll(s.Path("/etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.EditHosts("10.0.0.1", "10.0.0.1\tfirst"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path("/etc/hosts"), []byte("127.0.0.1 localhost\n127.0.1.1 old\n127.0.1.1 twice\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.EditHosts("127.0.1.1", "127.0.1.1\tnew"); err != nil {
		t.Fatal(err)
	}
	if err := s.EditHosts("10.0.0.2", "10.0.0.2\thost.docker.internal"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(s.Path("/etc/hosts"))
	if want := "127.0.0.1 localhost\n127.0.1.1\tnew\n10.0.0.2\thost.docker.internal\n"; string(b) != want {
		t.Fatalf("hosts:\n%s\nwant:\n%s", b, want)
	}
}

func TestPathAndLogger(t *testing.T) {
	if got := (Sys{}).Path("/etc/hosts"); got != "/etc/hosts" {
		t.Errorf("no root: %s", got)
	}
	if got := (Sys{Root: "/r"}).Path("/etc/hosts"); got != "/r/etc/hosts" {
		t.Errorf("root /r: %s", got)
	}
	if (Sys{}).Logger() == nil {
		t.Error("no logger without Log")
	}
}
