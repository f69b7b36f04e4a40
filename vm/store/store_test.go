package store

import (
	"errors"
	"os"
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

// A relative $VMDOCK_HOME is made absolute: the host agent and the
// commands run from different folders and must name the same home.
func TestHomeRelativeAndUnknown(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(HomeEnv, "rel/home")
	if h, err := Home(); err != nil || h != filepath.Join(cwd, "rel/home") {
		t.Fatalf("Home = %q, %v; want %s", h, err, filepath.Join(cwd, "rel/home"))
	}
	t.Setenv(HomeEnv, "")
	t.Setenv("HOME", "")
	if h, err := Home(); err == nil || !strings.Contains(err.Error(), "$"+HomeEnv) {
		t.Fatalf("Home without a home folder = %q, %v; want an error naming $%s", h, err, HomeEnv)
	}
}

func TestValidateProfileMessage(t *testing.T) {
	err := ValidateProfile("Bad Name")
	if err == nil || !strings.Contains(err.Error(), `"Bad Name"`) || !strings.Contains(err.Error(), "a-z 0-9 . _ -") {
		t.Fatalf("ValidateProfile = %v; want the name and what is accepted", err)
	}
}

// Create tightens a folder that already exists (made by hand, or by an
// older version) to 0700.
func TestCreateTightensAnExistingFolder(t *testing.T) {
	home := t.TempDir()
	inst, _ := Open(home, "x")
	if err := os.Mkdir(inst.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(inst.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := inst.Create(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(inst.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode after Create: %v, %v", fi.Mode(), err)
	}
	if inst.Exists() {
		t.Fatal("a folder without a config exists")
	}
}

func TestCreateRefusesWhatIsNotAFolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	inst, _ := Open(filepath.Join(file, "home"), "x")
	if err := inst.Create(); err == nil || !strings.Contains(err.Error(), "create vmdock home") {
		t.Fatalf("Create under a file = %v", err)
	}
	// A dangling link in the instance's place is not a folder.
	home := t.TempDir()
	inst, _ = Open(home, "x")
	if err := os.Symlink(filepath.Join(home, "gone"), inst.Dir); err != nil {
		t.Fatal(err)
	}
	if err := inst.Create(); err == nil || !strings.Contains(err.Error(), "create instance folder") {
		t.Fatalf("Create over a dangling link = %v", err)
	}
}

func TestListSkipsFilesAndFailsOnAFileHome(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "stray"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := List(home); err != nil || len(l) != 0 {
		t.Fatalf("List with only a file = %v, %v", l, err)
	}
	if _, err := List(filepath.Join(home, "stray")); err == nil || !strings.Contains(err.Error(), "list instances") {
		t.Fatalf("List of a file = %v", err)
	}
}

func TestReadPID(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadPID(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing pid file: %v; want os.ErrNotExist", err)
	}
	for content, want := range map[string]int{"123\n": 123, " 42 ": 42, "7": 7} {
		p := filepath.Join(dir, "ok")
		os.WriteFile(p, []byte(content), 0o600)
		if pid, err := ReadPID(p); err != nil || pid != want {
			t.Errorf("ReadPID(%q) = %d, %v; want %d", content, pid, err, want)
		}
	}
	for _, content := range []string{"", "\n", "abc", "0", "-5", "12 34"} {
		p := filepath.Join(dir, "bad")
		os.WriteFile(p, []byte(content), 0o600)
		if pid, err := ReadPID(p); err == nil || errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "no pid") {
			t.Errorf("ReadPID(%q) = %d, %v; want a 'no pid' error", content, pid, err)
		}
	}
}

// The holder's pid is in the lock file while it holds the lock, and gone
// once it lets go, so a stale pid never names an idle process.
func TestLockFileHoldsThePid(t *testing.T) {
	inst := &Instance{Name: "x", Dir: t.TempDir()}
	l, err := inst.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := ReadPID(inst.LockPath()); err != nil || pid != os.Getpid() {
		t.Fatalf("pid in the lock: %d, %v; want %d", pid, err, os.Getpid())
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(inst.LockPath()); err != nil || len(b) != 0 {
		t.Fatalf("lock file after Unlock: %q, %v; want empty", b, err)
	}
	var none *Lock
	if err := none.Unlock(); err != nil {
		t.Fatalf("nil Unlock: %v", err)
	}
}

func TestLockMissingFolder(t *testing.T) {
	inst := &Instance{Name: "x", Dir: filepath.Join(t.TempDir(), "missing")}
	_, err := inst.Lock()
	if err == nil || errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "lock profile x") {
		t.Fatalf("Lock without the folder = %v; want a plain error, not ErrLocked", err)
	}
}

// BusyError carries what package instance needs to say more about the
// holder: the profile, the holder and the lock's path.
func TestBusyError(t *testing.T) {
	inst := &Instance{Name: "x", Dir: t.TempDir()}
	a, err := inst.Lock()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Unlock()
	_, err = inst.Lock()
	var be *BusyError
	if !errors.As(err, &be) {
		t.Fatalf("second Lock = %v (%T); want a *BusyError", err, err)
	}
	if be.Profile != "x" || be.Holder != "pid "+strconv.Itoa(os.Getpid()) || be.Path != inst.LockPath() {
		t.Fatalf("BusyError = %+v", be)
	}
	want := "profile x is busy: pid " + strconv.Itoa(os.Getpid()) + " holds " + inst.LockPath() + " (another vmdock command is running): instance is locked"
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// A file of the user's where the instance folder would go is refused and
// left as it was, mode and content.
func TestCreateRefusesAFileInTheWay(t *testing.T) {
	inst, _ := Open(t.TempDir(), "x")
	if err := os.WriteFile(inst.Dir, []byte("notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := inst.Create()
	if err == nil || !strings.Contains(err.Error(), inst.Dir) || !strings.Contains(err.Error(), "in the way") {
		t.Fatalf("Create over a file = %v, want a refusal naming it", err)
	}
	fi, _ := os.Stat(inst.Dir)
	if b, _ := os.ReadFile(inst.Dir); string(b) != "notes" || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file changed: %q, mode %v", b, fi.Mode())
	}
}

// Container domains name a profile's zone after the profile with "." and
// "_" made "-": two profiles that give one zone would answer each other's
// names, so the second is refused when it is made.
func TestCreateRefusesAProfileWhoseDomainZoneIsTaken(t *testing.T) {
	home := t.TempDir()
	first, err := Open(home, "shop.dev")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Create(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(first.ConfigPath(), []byte("arch: amd64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"shop-dev", "shop_dev"} {
		inst, err := Open(home, name)
		if err != nil {
			t.Fatal(err)
		}
		err = inst.Create()
		if err == nil || !strings.Contains(err.Error(), `"shop.dev"`) || !strings.Contains(err.Error(), "shop-dev.vmdock.localhost") || strings.Contains(err.Error(), "\n") {
			t.Errorf("create %s beside shop.dev: %v, want a one-line refusal naming shop.dev and the zone", name, err)
		}
		if _, statErr := os.Stat(inst.Dir); !os.IsNotExist(statErr) {
			t.Errorf("a refused profile left its folder %s", inst.Dir)
		}
	}
	if err := first.Create(); err != nil {
		t.Errorf("creating the existing profile again: %v", err)
	}
	other, _ := Open(home, "shopdev")
	if err := other.Create(); err != nil {
		t.Errorf("a profile with its own zone: %v", err)
	}
}

// A relative $VMDOCK_HOME cannot be made absolute once the working folder
// is gone; the error names the variable and its value instead of a home
// somewhere else.
func TestHomeRelativeWithoutAWorkingFolder(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(gone)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PWD", "")
	t.Setenv(HomeEnv, "rel/home")
	h, err := Home()
	if err == nil || !strings.Contains(err.Error(), `$`+HomeEnv+` "rel/home"`) {
		t.Fatalf("Home = %q, %v; want an error naming $%s and its value", h, err, HomeEnv)
	}
}

// Only created profiles (with a config) hold a zone: a folder left
// without one, by a start refused early, does not refuse a new profile.
func TestZoneOfAFolderWithoutConfigIsFree(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "shop.dev"), 0o700); err != nil {
		t.Fatal(err)
	}
	inst, _ := Open(home, "shop_dev")
	if err := inst.Create(); err != nil {
		t.Fatalf("create shop_dev beside a config-less shop.dev folder: %v", err)
	}
	if err := os.WriteFile(inst.ConfigPath(), []byte("arch: amd64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// now shop_dev holds the zone, and the folder's profile is refused
	left, _ := Open(home, "shop.dev")
	if err := left.Create(); err == nil || !strings.Contains(err.Error(), `"shop_dev"`) {
		t.Errorf("create shop.dev beside shop_dev: %v, want a refusal naming shop_dev", err)
	}
}
