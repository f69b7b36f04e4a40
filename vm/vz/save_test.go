package vz

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

func statePath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "vm.state")
}

// onlyFile fails unless dir holds exactly want (no temporary left over).
func onlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s holds %v, want %v", dir, got, want)
	}
}

func TestSaveWritesStateAndStops(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	path := statePath(t)
	saved, err := m.Save(t.Context(), path)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	sum := sha256.Sum256(f.savedBytes)
	want := driver.SavedState{Format: stateFormat, Size: int64(len(f.savedBytes)), SHA256: hex.EncodeToString(sum[:]), Hypervisor: "macOS 15.5 (24F74)", Accel: "vz"}
	if saved != want {
		t.Errorf("SavedState = %+v, want %+v", saved, want)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != string(f.savedBytes) {
		t.Errorf("state file = %q, %v", b, err)
	}
	onlyFiles(t, filepath.Dir(path), "vm.state")
	if got := f.called(); !slices.Equal(got, []string{"Start", "CheckSavable", "Pause", "SaveState", "Stop"}) {
		t.Errorf("calls = %v", got)
	}
	if err, ok := waitResult(m, time.Second); !ok || err != nil {
		t.Errorf("Wait after a save = %v (returned %v), want nil", err, ok)
	}
}

func TestSaveRefusedByVZLeavesTheGuestRunning(t *testing.T) {
	f := newFakeVZ()
	f.notSavable = errors.New("Unsupported directory sharing device in configuration.")
	m := bootFake(t, f)
	_, err := m.Save(t.Context(), statePath(t))
	if err == nil || !strings.Contains(err.Error(), "directory sharing") {
		t.Fatalf("Save = %v, want vz's reason", err)
	}
	if got := f.called(); !slices.Equal(got, []string{"Start", "CheckSavable"}) {
		t.Errorf("calls = %v: the guest must not even be paused", got)
	}
	assertRunsOn(t, m, f)
}

func TestSaveFailuresResumeTheGuest(t *testing.T) {
	tests := map[string]struct {
		script func(*fakeVZ)
		calls  []string
	}{
		"pause fails": {
			func(f *fakeVZ) { f.pauseErr = errors.New("pause refused") },
			[]string{"Start", "CheckSavable", "Pause"},
		},
		"save fails": {
			func(f *fakeVZ) { f.saveErr = errors.New("VZErrorSave") },
			[]string{"Start", "CheckSavable", "Pause", "SaveState", "Resume"},
		},
		"stop after the save fails": {
			func(f *fakeVZ) { f.stopErr = errors.New("stop refused") },
			[]string{"Start", "CheckSavable", "Pause", "SaveState", "Stop", "Resume"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeVZ()
			m := bootFake(t, f)
			tt.script(f)
			path := statePath(t)
			if _, err := m.Save(t.Context(), path); err == nil {
				t.Fatal("Save succeeded")
			}
			if got := f.called(); !slices.Equal(got, tt.calls) {
				t.Errorf("calls = %v, want %v", got, tt.calls)
			}
			onlyFiles(t, filepath.Dir(path)) // no state, no temporary
			assertRunsOn(t, m, f)
		})
	}
}

func TestSaveOfAFailedResumeSaysSo(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	f.saveErr = errors.New("VZErrorSave")
	f.resumeErr = errors.New("resume refused")
	_, err := m.Save(t.Context(), statePath(t))
	if err == nil || !strings.Contains(err.Error(), "VZErrorSave") || !strings.Contains(err.Error(), "resume refused") {
		t.Errorf("Save = %v, want both failures", err)
	}
}

func TestSaveOfAStoppedMachine(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	f.guestPowerOff()
	m.Wait()
	if _, err := m.Save(t.Context(), statePath(t)); err == nil {
		t.Error("Save of a stopped VM succeeded")
	}
}

// assertRunsOn checks that the guest runs as before a failed save.
func assertRunsOn(t *testing.T, m *machine, f *fakeVZ) {
	t.Helper()
	if s := f.State(); s != stateRunning {
		t.Errorf("VM is %s after the failed save, want running", s)
	}
	if _, done := waitResult(m, 20*time.Millisecond); done {
		t.Error("the machine ended after a failed save")
	}
}

func TestResumeRestoresAndRuns(t *testing.T) {
	// Saved by one machine, resumed into a new one built the same way.
	saver := newFakeVZ()
	path := statePath(t)
	if _, err := bootFake(t, saver).Save(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	f := newFakeVZ()
	m, err := resumeMachine(f, testConfig(), path)
	if err != nil {
		t.Fatalf("resumeMachine: %v", err)
	}
	if got := f.called(); !slices.Equal(got, []string{"RestoreState", "Resume"}) {
		t.Errorf("calls = %v: a resume must not boot", got)
	}
	if f.restored != path || f.State() != stateRunning {
		t.Errorf("restored %q, state %s", f.restored, f.State())
	}
	if _, done := waitResult(quick(m), 20*time.Millisecond); done {
		t.Error("the resumed machine ended")
	}
}

func TestResumeFailureLeavesNothingRunning(t *testing.T) {
	tests := map[string]struct {
		script func(*fakeVZ)
		calls  []string
	}{
		"restore refused": {
			func(f *fakeVZ) {
				f.restoreErr = errors.New(`The virtual machine failed to restore with error "invalid argument".`)
			},
			[]string{"RestoreState"},
		},
		"resume refused": {
			func(f *fakeVZ) { f.resumeErr = errors.New("resume refused") },
			[]string{"RestoreState", "Resume", "Stop"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeVZ()
			tt.script(f)
			m, err := resumeMachine(f, testConfig(), statePath(t))
			if m != nil || err == nil {
				t.Fatalf("resumeMachine = %v, %v; want an error", m, err)
			}
			if got := f.called(); !slices.Equal(got, tt.calls) {
				t.Errorf("calls = %v, want %v", got, tt.calls)
			}
			if s := f.State(); s != stateStopped {
				t.Errorf("VM left %s, want stopped", s)
			}
		})
	}
}

func TestCheckSavedState(t *testing.T) {
	ok := driver.SavedState{Format: stateFormat, Hypervisor: "macOS 15.5 (24F74)", Accel: "vz"}
	if err := checkSavedState(ok, "macOS 15.5 (24F74)"); err != nil {
		t.Errorf("same format and release: %v", err)
	}
	qemu := ok
	qemu.Format = "qemu-migration+zstd"
	if err := checkSavedState(qemu, "macOS 15.5 (24F74)"); err == nil || !strings.Contains(err.Error(), "qemu-migration") {
		t.Errorf("QEMU's state: %v", err)
	}
	if err := checkSavedState(ok, "macOS 15.6 (24G84)"); err == nil || !strings.Contains(err.Error(), "15.5") {
		t.Errorf("another macOS release: %v", err)
	}
}

func TestSaveBlocker(t *testing.T) {
	share := driver.Spec{Shares: []mounts.Share{{Tag: "home", HostPath: "/Users/ann", Type: mounts.TypeVirtiofs}}}
	rosetta := driver.Spec{Rosetta: true}
	arm := func(v string) HostInfo { return HostInfo{Arch: driver.ArchARM64, MacOSVersion: v} }
	tests := []struct {
		name    string
		spec    driver.Spec
		host    HostInfo
		savable bool
		want    string // "" for no blocker
	}{
		{"macOS 13", driver.Spec{}, arm("13.6.1"), true, "macOS 14.0 or newer"},
		{"macOS 14", driver.Spec{}, arm("14.0"), true, ""},
		{"Intel Mac", driver.Spec{}, HostInfo{Arch: driver.ArchAMD64, MacOSVersion: "15.5"}, false, "Apple silicon"},
		{"share on macOS 14", share, arm("14.6"), true, "/Users/ann"},
		{"share on macOS 15", share, arm("15.0"), true, ""},
		{"Rosetta on macOS 14", rosetta, arm("14.6"), true, "Rosetta"},
		{"Rosetta on macOS 26", rosetta, arm("26.0"), true, ""},
		{"unreadable version", driver.Spec{}, arm("fourteen"), true, "not understood"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := saveBlocker(tt.spec, tt.host, tt.savable)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("saveBlocker = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("saveBlocker = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

// A save whose context ended before the pause does not touch the guest.
func TestSaveCancelledBeforeThePause(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	path := statePath(t)
	if _, err := m.Save(ctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with an ended context = %v, want context.Canceled", err)
	}
	if got := f.called(); !slices.Equal(got, []string{"Start", "CheckSavable"}) {
		t.Errorf("calls = %v: the guest must not be paused", got)
	}
	onlyFiles(t, filepath.Dir(path))
	assertRunsOn(t, m, f)
}

// Failures around vz's write (the temporary name blocked, the state file
// not movable to its name) leave no file behind and the guest running.
func TestSaveFailuresAroundTheStateFile(t *testing.T) {
	for name, tc := range map[string]struct {
		block func(dir string) // puts something in the way
		left  []string         // what dir holds afterwards
		want  string
	}{
		"a folder at the temporary name": {func(dir string) {
			mustMkdir(t, filepath.Join(dir, ".vm.state.saving", "x"))
		}, []string{".vm.state.saving"}, "save: remove"},
		"a folder at the state's name": {func(dir string) {
			mustMkdir(t, filepath.Join(dir, "vm.state", "x"))
		}, []string{"vm.state"}, "save:"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeVZ()
			m := bootFake(t, f)
			path := statePath(t)
			tc.block(filepath.Dir(path))
			_, err := m.Save(t.Context(), path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Save = %v, want an error containing %q", err, tc.want)
			}
			onlyFiles(t, filepath.Dir(path), tc.left...)
			assertRunsOn(t, m, f)
		})
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}
