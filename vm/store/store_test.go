package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestOpenInstanceProfile(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"default", true}, {"dev-1.x_y", true}, {"9", true}, {strings.Repeat("a", 63), true},
		{"", false}, {"../x", false}, {"a/b", false}, {"Dev", false}, {"-x", false}, {".x", false},
		{strings.Repeat("a", 64), false}, {"a b", false},
	}
	home := t.TempDir()
	for _, tt := range tests {
		inst, err := Open(home, tt.name)
		if tt.ok != (err == nil) {
			t.Errorf("Open(%q) err = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err == nil && inst.Dir != filepath.Join(home, tt.name) {
			t.Errorf("Open(%q).Dir = %s", tt.name, inst.Dir)
		}
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Fatalf("Open created files: %v", entries)
	}
}

func TestHome(t *testing.T) {
	t.Setenv(HomeEnv, "/x/y")
	if h, err := Home(); err != nil || h != "/x/y" {
		t.Fatalf("Home = %q, %v", h, err)
	}
	t.Setenv(HomeEnv, "")
	t.Setenv("HOME", "/home/u")
	if h, err := Home(); err != nil || h != "/home/u/.vmdock" {
		t.Fatalf("Home = %q, %v", h, err)
	}
}

func TestCreateAndList(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	for _, name := range []string{"zeta", "alpha"} {
		inst, _ := Open(home, name)
		if err := inst.Create(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(inst.ConfigPath(), []byte("arch: amd64\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(inst.Dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("instance dir mode %v, %v", fi.Mode(), err)
		}
	}
	os.Mkdir(filepath.Join(home, "noconfig"), 0o700)
	os.Mkdir(filepath.Join(home, "Bad Name"), 0o700)
	list, err := List(home)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range list {
		names = append(names, i.Name)
	}
	if strings.Join(names, ",") != "alpha,zeta" {
		t.Fatalf("List = %v", names)
	}
	if l, err := List(filepath.Join(home, "missing")); err != nil || len(l) != 0 {
		t.Fatalf("missing home: %v, %v", l, err)
	}
}

// TestLockHelper is not a test: it is the other process of TestLockOtherProcess.
func TestLockHelper(t *testing.T) {
	dir := os.Getenv("VMDOCK_TEST_LOCK_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	inst := &Instance{Name: "x", Dir: dir}
	l, err := inst.Lock()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n') // hold until the parent closes stdin
	l.Unlock()
	os.Exit(0)
}

// lockInOtherProcess has TestLockHelper take dir's lock in a child
// process; release lets it go and waits for the child to exit.
func lockInOtherProcess(t *testing.T, dir string) (pid int, release func() error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelper$")
	cmd.Env = append(os.Environ(), "VMDOCK_TEST_LOCK_DIR="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	release = func() error { stdin.Close(); return cmd.Wait() }
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(line) != "locked" {
		release()
		t.Fatalf("helper said %q", line)
	}
	return cmd.Process.Pid, release
}

func TestLockOtherProcess(t *testing.T) {
	inst := &Instance{Name: "x", Dir: t.TempDir()}
	pid, release := lockInOtherProcess(t, inst.Dir)
	_, err := inst.Lock()
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(pid)) {
		t.Fatalf("Lock while held elsewhere: %v; want ErrLocked naming pid %d", err, pid)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	l, err := inst.Lock()
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	l.Unlock()
}

// A second Lock in the same process is refused like another holder's:
// nothing below a command locks again, and a silent second hold would hide
// such a bug.
func TestLockNotReentrant(t *testing.T) {
	inst := &Instance{Name: "x", Dir: t.TempDir()}
	a, err := inst.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Lock(); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Lock in the same process: %v; want ErrLocked naming our pid", err)
	}
	a.Unlock()
	a.Unlock() // a second Unlock is a no-op
	b, err := inst.Lock()
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	b.Unlock()
}

// The winner of a lock writes its pid a moment after taking it; a loser
// that looks in that moment still names the holder.
func TestLockHolderWaitsForThePid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		os.WriteFile(path, []byte("4242\n"), 0o600)
	}()
	if got := lockHolder(path); got != "pid 4242" {
		t.Fatalf("holder = %q, want pid 4242", got)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := lockHolder(path); got != "another process" {
		t.Fatalf("holder of a lock without a pid = %q", got)
	}
}
