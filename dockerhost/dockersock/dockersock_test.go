package dockersock

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// recorder runs commands for real (no sudo) and remembers them.
type recorder struct {
	mu   sync.Mutex
	runs []string
}

func (r *recorder) Run(ctx context.Context, argv ...string) error {
	r.mu.Lock()
	r.runs = append(r.runs, strings.Join(argv, " "))
	r.mu.Unlock()
	return ExecRunner{}.Run(ctx, argv...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs)
}

type fixture struct {
	l    *Linker
	rec  *recorder
	home string
}

// newFixture is a vmdock home with no instance sockets yet, and a link
// path in a folder of its own.
func newFixture(t *testing.T) fixture {
	t.Helper()
	home := filepath.Join(shortdir.New(t), "vmdock home")
	for _, p := range []string{"dev", "other"} {
		if err := os.MkdirAll(filepath.Join(home, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	return fixture{l: &Linker{Path: filepath.Join(shortdir.New(t), "docker.sock"), Home: home, Run: rec}, rec: rec, home: home}
}

func (f fixture) socket(profile string) string { return filepath.Join(f.home, profile, "docker.sock") }

// serve listens on the instance socket, as a running host agent does;
// closing it removes the file, as a stop does.
func serve(t *testing.T, path string) net.Listener {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

func status(t *testing.T, l *Linker) Status {
	t.Helper()
	st, err := l.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestLinkDanglesWhileStoppedAndIsLiveWhenStarted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if st := status(t, f.l); st.State != Absent {
		t.Fatalf("before link: %+v", st)
	}
	if _, err := f.l.Link(ctx, f.socket("dev")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(f.l.Path); got != f.socket("dev") {
		t.Fatalf("link points at %q, want %s", got, f.socket("dev"))
	}
	if st := status(t, f.l); st.State != Dangling || st.Profile != "dev" {
		t.Fatalf("instance not started: %+v, want dangling for profile dev", st)
	}
	ln := serve(t, f.socket("dev")) // start: the same path again
	if st := status(t, f.l); st.State != Live {
		t.Fatalf("instance running: %+v, want live", st)
	}
	c, err := net.Dial("unix", f.l.Path)
	if err != nil {
		t.Fatalf("dial through the link: %v", err)
	}
	c.Close()
	ln.Close() // stop
	if st := status(t, f.l); st.State != Dangling {
		t.Fatalf("after stop: %+v, want dangling", st)
	}
	serve(t, f.socket("dev")) // start again: no relink needed
	if st := status(t, f.l); st.State != Live {
		t.Fatalf("after a second start: %+v, want live", st)
	}
	if n := f.rec.count(); n != 1 {
		t.Errorf("%d commands run, want the one ln: %q", n, f.rec.runs)
	}
	if st := status(t, f.l); st.ProfileGone {
		t.Errorf("%+v: profile gone while its folder is there", st)
	}
}

func TestStatusOfALinkToADeletedProfile(t *testing.T) {
	f := newFixture(t)
	if _, err := f.l.Link(context.Background(), f.socket("dev")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.home, "dev")); err != nil {
		t.Fatal(err)
	}
	st := status(t, f.l)
	if st.State != Dangling || !st.ProfileGone {
		t.Fatalf("%+v, want dangling with the profile gone", st)
	}
	if d := Describe(st); !strings.Contains(d, "no longer exists") || !strings.Contains(d, "docker-sock unlink") {
		t.Errorf("Describe = %q, want it to say the profile is gone and how to remove the link", d)
	}
}

func TestStatusOfASocketFileNobodyServes(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("unix", f.socket("dev"))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // a host agent killed with -9
	ln.Close()
	if _, err := f.l.Link(context.Background(), f.socket("dev")); err != nil {
		t.Fatal(err)
	}
	if st := status(t, f.l); st.State != NotAnswering {
		t.Fatalf("%+v, want not answering", st)
	}
}

// foreign puts something vmdock did not create at path and returns what
// Status should call it.
var foreign = []struct {
	name string
	make func(t *testing.T, path string)
	what string
}{
	{"regular file", func(t *testing.T, path string) {
		if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
			t.Fatal(err)
		}
	}, "a regular file"},
	{"directory", func(t *testing.T, path string) {
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}, "a directory"},
	{"socket", func(t *testing.T, path string) { serve(t, path) }, "a socket vmdock did not create"},
	{"symlink elsewhere", func(t *testing.T, path string) {
		if err := os.Symlink("/run/docker-desktop/docker.sock", path); err != nil {
			t.Fatal(err)
		}
	}, "a symlink to /run/docker-desktop/docker.sock, which is not a socket of a vmdock instance"},
	{"symlink to a vmdock folder's other file", func(t *testing.T, path string) {
		if err := os.Symlink("/home/u/.vmdock/dev/ha.sock", path); err != nil {
			t.Fatal(err)
		}
	}, "a symlink to /home/u/.vmdock/dev/ha.sock"},
}

func TestLinkAndUnlinkRefuseWhatVmdockDidNotCreate(t *testing.T) {
	for _, fc := range foreign {
		t.Run(fc.name, func(t *testing.T) {
			f := newFixture(t)
			fc.make(t, f.l.Path)
			before, _ := os.Lstat(f.l.Path)
			if st := status(t, f.l); st.State != Foreign || !strings.HasPrefix(st.What, fc.what) {
				t.Errorf("status %+v, want foreign: %s", st, fc.what)
			}
			for verb, do := range map[string]func() (Status, error){
				"replace": func() (Status, error) { return f.l.Link(context.Background(), f.socket("dev")) },
				"remove":  func() (Status, error) { return f.l.Unlink(context.Background()) },
			} {
				_, err := do()
				if err == nil {
					t.Fatalf("%s: no error", verb)
				}
				msg := err.Error()
				if !strings.Contains(msg, "refusing to "+verb+" "+f.l.Path) || !strings.Contains(msg, fc.what) || strings.Contains(msg, "\n") {
					t.Errorf("%s: error %q, want one line naming %s and %q", verb, msg, f.l.Path, fc.what)
				}
			}
			if n := f.rec.count(); n != 0 {
				t.Errorf("commands run on a foreign path: %q", f.rec.runs)
			}
			after, err := os.Lstat(f.l.Path)
			if err != nil || after.Mode() != before.Mode() || after.ModTime() != before.ModTime() {
				t.Errorf("%s changed: %v", f.l.Path, err)
			}
			if fc.name == "regular file" {
				if b, _ := os.ReadFile(f.l.Path); string(b) != "keep me" {
					t.Errorf("file content now %q", b)
				}
			}
		})
	}
}

func TestLinkReplacesOnlyItsOwnLink(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.l.Link(ctx, f.socket("other")); err != nil {
		t.Fatal(err)
	}
	before, err := f.l.Link(ctx, f.socket("dev"))
	if err != nil {
		t.Fatal(err)
	}
	if before.Profile != "other" {
		t.Errorf("status before relink %+v, want profile other", before)
	}
	if got, _ := os.Readlink(f.l.Path); got != f.socket("dev") {
		t.Fatalf("link points at %q, want %s", got, f.socket("dev"))
	}
	n := f.rec.count()
	if _, err := f.l.Link(ctx, f.socket("dev")); err != nil {
		t.Fatal(err)
	}
	if f.rec.count() != n {
		t.Errorf("linking again ran %q, want nothing", f.rec.runs[n:])
	}
	// A relative link into the home is vmdock's too.
	os.Remove(f.l.Path)
	rel, _ := filepath.Rel(filepath.Dir(f.l.Path), f.socket("other"))
	if err := os.Symlink(rel, f.l.Path); err != nil {
		t.Fatal(err)
	}
	if st := status(t, f.l); st.Profile != "other" || st.State != Dangling {
		t.Errorf("relative link: %+v, want profile other, dangling", st)
	}
}

func TestLinkRejectsANonInstanceSocket(t *testing.T) {
	f := newFixture(t)
	for _, s := range []string{"/var/run/other.sock", filepath.Join(f.home, "dev", "ha.sock"), filepath.Join(f.home, "docker.sock"), "relative/docker.sock"} {
		if _, err := f.l.Link(context.Background(), s); err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Link(%q) = %v, want an error naming it", s, err)
		}
	}
	if _, err := os.Lstat(f.l.Path); err == nil {
		t.Error("a link was made")
	}
}

func TestUnlinkRemovesOnlyTheLink(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	serve(t, f.socket("dev"))
	if _, err := f.l.Link(ctx, f.socket("dev")); err != nil {
		t.Fatal(err)
	}
	before, err := f.l.Unlink(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.State != Live || before.Profile != "dev" {
		t.Errorf("status before unlink %+v", before)
	}
	if _, err := os.Lstat(f.l.Path); err == nil {
		t.Fatal("link still there")
	}
	c, err := net.Dial("unix", f.socket("dev"))
	if err != nil {
		t.Fatalf("the instance's socket went with the link: %v", err)
	}
	c.Close()
	n := f.rec.count()
	if st, err := f.l.Unlink(ctx); err != nil || st.State != Absent || f.rec.count() != n {
		t.Errorf("unlink of nothing: %+v, %v, ran %q; want absent, no error, nothing run", st, err, f.rec.runs[n:])
	}
}

func TestExecRunnerWithoutSudoInstalled(t *testing.T) {
	var echo bytes.Buffer
	r := ExecRunner{Sudo: true, Echo: &echo, LookPath: func(string) (string, error) { return "", os.ErrNotExist }}
	dir := shortdir.New(t)
	err := r.Run(context.Background(), "touch", filepath.Join(dir, "x"))
	if err == nil || !strings.Contains(err.Error(), "sudo is not installed") || !strings.Contains(err.Error(), PathEnv) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v, want one line saying sudo is missing and naming %s", err, PathEnv)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil || echo.Len() != 0 {
		t.Errorf("the command ran anyway (echo %q)", echo.String())
	}
}

// The command is printed, sudo first, before sudo runs it.
func TestExecRunnerPrintsTheSudoCommandFirst(t *testing.T) {
	bin := shortdir.New(t)
	log := filepath.Join(bin, "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" > '" + log + "'\n"
	if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var echo bytes.Buffer
	if err := (ExecRunner{Sudo: true, Echo: &echo}).Run(context.Background(), "ln", "-s", "/a b/docker.sock", "/var/run/docker.sock"); err != nil {
		t.Fatal(err)
	}
	if want := "running: sudo ln -s '/a b/docker.sock' /var/run/docker.sock\n"; echo.String() != want {
		t.Errorf("printed %q, want %q", echo.String(), want)
	}
	if b, _ := os.ReadFile(log); string(b) != "ln -s /a b/docker.sock /var/run/docker.sock\n" {
		t.Errorf("sudo got %q", b)
	}
}

func TestDescribe(t *testing.T) {
	for _, tt := range []struct {
		st   Status
		want string
	}{
		{Status{Path: "/var/run/docker.sock", State: Absent}, "/var/run/docker.sock: absent (not linked)"},
		{Status{Path: "/var/run/docker.sock", State: Foreign, What: "a regular file"}, "/var/run/docker.sock: not vmdock's: a regular file"},
		{Status{Path: "/l", State: Live, Target: "/h/dev/docker.sock", Profile: "dev"}, "/l -> /h/dev/docker.sock (profile dev): live"},
		{Status{Path: "/l", State: Dangling, Target: "/h/dev/docker.sock", Profile: "dev"},
			"/l -> /h/dev/docker.sock (profile dev): dangling: the instance is not running; `vmdock start -p dev` makes it live again"},
	} {
		if got := Describe(tt.st); got != tt.want {
			t.Errorf("Describe(%+v) = %q, want %q", tt.st, got, tt.want)
		}
	}
}

// A vmdock link whose target became a directory must be replaced, not
// followed: ln -sf would make docker.sock inside that directory, as root.
func TestRelinkOverALinkToADirectoryReplacesTheLink(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.l.Link(ctx, f.socket("dev")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.socket("dev"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.Link(ctx, f.socket("other")); err != nil {
		t.Fatalf("relink: %v", err)
	}
	if got, _ := os.Readlink(f.l.Path); got != f.socket("other") {
		t.Errorf("link points at %q, want %s", got, f.socket("other"))
	}
	if entries, _ := os.ReadDir(f.socket("dev")); len(entries) != 0 {
		t.Errorf("ln wrote into the directory the old link pointed at: %v", entries)
	}
}
