package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/resume"
	"github.com/vmdock/vmdock/vm/store"
)

var testHost = config.Host{OS: "linux", Arch: "amd64", CPUs: 4, Accel: "kvm"}

// fixture copies testdata/formatN/default into a fresh home.
func fixture(t *testing.T, format int) *store.Instance {
	t.Helper()
	src := filepath.Join("testdata", fmt.Sprintf("format%d", format), "default")
	inst := &store.Instance{Name: "default", Dir: filepath.Join(t.TempDir(), "default")}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(inst.Dir, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(inst.Dir, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// fileState is what a snapshot keeps of one file: any write, replacement
// or removal changes it.
type fileState struct {
	content string
	mod     int64
	inode   uint64
}

func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	m := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		m[rel] = fileState{content: string(b), mod: fi.ModTime().UnixNano(), inode: fi.Sys().(*syscall.Stat_t).Ino}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDetectsEachFixture(t *testing.T) {
	for _, n := range []int{FormatNoRuntime, FormatNoNetStack, FormatUnversioned} {
		if got, err := Detect(fixture(t, n)); err != nil || got != n {
			t.Errorf("format %d fixture detected as %d (%v)", n, got, err)
		}
	}
}

// Each older format comes to the current one with the user's config and
// disks untouched, the implicit records written down as the old code read
// them, and the config loading exactly as before.
func TestMigratesEachOlderFormat(t *testing.T) {
	stacks := map[int]string{FormatNoRuntime: "slirp", FormatNoNetStack: "slirp", FormatUnversioned: "gvisor"}
	for n, stack := range stacks {
		t.Run(fmt.Sprint("format", n), func(t *testing.T) {
			inst := fixture(t, n)
			before := snapshot(t, inst.Dir)
			cfgBefore, err := inst.LoadConfig(testHost)
			if err != nil {
				t.Fatal(err)
			}
			from, err := Migrate(inst, "v9.0.0")
			if err != nil || from != n {
				t.Fatalf("Migrate = %d, %v; want from %d", from, err, n)
			}
			after := snapshot(t, inst.Dir)
			for name, st := range before {
				if after[name] != st {
					t.Errorf("%s was changed by the migration", name)
				}
			}
			if rec, ok, err := Read(inst); err != nil || !ok || rec != (Record{Format: Current, WrittenBy: "v9.0.0"}) {
				t.Errorf("record %+v %v %v, want format %d by v9.0.0", rec, ok, err, Current)
			}
			if rt := after["data.runtime"].content; rt != "docker\n" {
				t.Errorf("data.runtime = %q, want docker", rt)
			}
			if s := after["network.stack"].content; s != stack+"\n" {
				t.Errorf("network.stack = %q, want %s", s, stack)
			}
			cfgAfter, err := inst.LoadConfig(testHost)
			if err != nil || !reflect.DeepEqual(cfgAfter, cfgBefore) {
				t.Errorf("the config loads differently after the migration:\n%+v\nwas\n%+v (%v)", cfgAfter, cfgBefore, err)
			}
			if from, err := Migrate(inst, "v9.1.0"); err != nil || from != Current || !reflect.DeepEqual(snapshot(t, inst.Dir), after) {
				t.Errorf("a second Migrate = %d, %v, or changed the folder; want nothing done", from, err)
			}
		})
	}
}

// The format-1 step infers from the files alone: a data disk without a
// record holds docker's data; without a data disk nothing is recorded.
func TestRuntimeRecordedOnlyWithADataDisk(t *testing.T) {
	inst := fixture(t, FormatNoRuntime)
	if err := os.Remove(inst.DataDiskPath()); err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(inst, "v9"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inst.DataRuntimePath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data.runtime written without a data disk (%v)", err)
	}
}

func TestNewFolderGetsTheRecord(t *testing.T) {
	inst := &store.Instance{Name: "new", Dir: t.TempDir()}
	if from, err := Migrate(inst, "v9"); err != nil || from != FormatUnversioned {
		t.Fatalf("Migrate = %d, %v", from, err)
	}
	if got, err := Detect(inst); err != nil || got != Current {
		t.Errorf("a new folder is format %d (%v), want %d", got, err, Current)
	}
	if entries, _ := os.ReadDir(inst.Dir); len(entries) != 1 {
		t.Errorf("a new folder got %d files, want the record alone", len(entries))
	}
}

// A folder a newer vmdock made is refused in one line that says which
// vmdock made it, and nothing in it changes.
func TestRefusesANewerFormat(t *testing.T) {
	inst := fixture(t, FormatUnversioned)
	if err := os.WriteFile(Path(inst), []byte(`{"format": 9, "writtenBy": "v2.3.0"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, inst.Dir)
	for name, err := range map[string]error{"Check": Check(inst, "v1.0.0"), "Migrate": func() error { _, err := Migrate(inst, "v1.0.0"); return err }()} {
		var newer *NewerError
		if !errors.As(err, &newer) || !strings.Contains(err.Error(), `made by vmdock v2.3.0, upgrade`) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s = %v; want one line: made by vmdock v2.3.0, upgrade", name, err)
		}
	}
	if !reflect.DeepEqual(snapshot(t, inst.Dir), before) {
		t.Error("the refused folder was changed")
	}
	if err := os.WriteFile(Path(inst), []byte(`{"format": 9}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Check(inst, "v1.0.0"); err == nil || !strings.Contains(err.Error(), "made by vmdock a newer version, upgrade") {
		t.Errorf("Check of a record without its vmdock = %v", err)
	}
}

func TestRefusesADamagedRecord(t *testing.T) {
	inst := fixture(t, FormatUnversioned)
	if err := os.WriteFile(Path(inst), []byte("four\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, inst.Dir)
	if _, err := Migrate(inst, "v1"); err == nil || !strings.Contains(err.Error(), `is damaged ("four")`) {
		t.Errorf("Migrate = %v, want the damaged record named", err)
	}
	if !reflect.DeepEqual(snapshot(t, inst.Dir), before) {
		t.Error("the folder with a damaged record was changed")
	}
}

// A step that fails takes back what the earlier ones added.
func TestFailedMigrationLeavesTheFolderAsItWas(t *testing.T) {
	inst := fixture(t, FormatNoRuntime)
	before := snapshot(t, inst.Dir)
	real := steps
	t.Cleanup(func() { steps = real })
	steps = append(append([]step{}, real[:len(real)-1]...), step{FormatUnversioned, func(*store.Instance) ([]string, error) {
		return nil, errors.New("disk full")
	}})
	_, err := Migrate(inst, "v9")
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "left as it was") {
		t.Fatalf("Migrate = %v, want the step's failure", err)
	}
	if after := snapshot(t, inst.Dir); !reflect.DeepEqual(after, before) {
		t.Errorf("the folder after a failed migration:\n%v\nwas\n%v", after, before)
	}
}

// A read-only folder fails at the first write, with nothing changed.
func TestMigrationOfAReadOnlyFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into a read-only folder")
	}
	inst := fixture(t, FormatNoRuntime)
	before := snapshot(t, inst.Dir)
	if err := os.Chmod(inst.Dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(inst.Dir, 0o700)
	if _, err := Migrate(inst, "v9"); err == nil {
		t.Fatal("migrated a read-only folder")
	}
	if !reflect.DeepEqual(snapshot(t, inst.Dir), before) {
		t.Error("the read-only folder was changed")
	}
}

// The saved VM state an older vmdock left cannot be resumed by this one:
// the start drops it for a cold boot, saying why in one line.
func TestOlderSavedStatesAreDroppedWithOneLine(t *testing.T) {
	for _, n := range []int{FormatNoNetStack, FormatUnversioned} {
		inst := fixture(t, n)
		saved, err := resume.Load(inst.SavedStateDir())
		if err != nil {
			t.Fatalf("format %d: %v", n, err)
		}
		now := saved.Fingerprint
		now.Vmdock = "v9.0.0"
		now.Disks = resume.MarkDisks(inst.DiskPath(), inst.DataDiskPath())
		s, why := resume.Decide(inst.SavedStateDir(), now)
		if s != nil || !strings.Contains(why, "vmdock version changed since the save") || strings.Contains(why, "\n") {
			t.Errorf("format %d: Decide = %v, %q; want a cold boot and one line", n, s, why)
		}
		// Another vmdock of the same version on the same disks still
		// refuses: the disks are other files than the saved ones.
		now.Vmdock = saved.Fingerprint.Vmdock
		if s, why := resume.Decide(inst.SavedStateDir(), now); s != nil || !strings.Contains(why, "disk") {
			t.Errorf("format %d: Decide with the old version = %v, %q; want the disks named", n, s, why)
		}
	}
}
