package instance

import (
	"errors"
	"os"
	"testing"

	"github.com/vmdock/vmdock/vm/store"
)

func createdInstance(t *testing.T) *store.Instance {
	t.Helper()
	inst, err := store.Open(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Create(); err != nil {
		t.Fatal(err)
	}
	return inst
}

// The cleanup a plain start or stop runs hands the instance folder to the
// driver cleanup cmd/vmdock wired in (the QEMU driver's, whose own tests
// cover what it ends; the CLI test covers the wiring).
func TestCleanupStaleEndsOrphans(t *testing.T) {
	inst := createdInstance(t)
	var dirs []string
	prev := EndOrphans
	t.Cleanup(func() { EndOrphans = prev })
	EndOrphans = func(dir string) error {
		dirs = append(dirs, dir)
		return nil
	}
	if err := cleanupStale(inst); err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 1 || dirs[0] != inst.Dir {
		t.Errorf("EndOrphans called with %q; want once with %q", dirs, inst.Dir)
	}
}

// A cleanup that fails, or none wired in (vz only, a test), does not stop
// the rest: the stale files of the instance itself are still removed.
func TestCleanupStaleWithoutOrphanCleanup(t *testing.T) {
	prev := EndOrphans
	t.Cleanup(func() { EndOrphans = prev })
	for name, end := range map[string]func(string) error{
		"none":   nil,
		"failed": func(string) error { return errors.New("orphan pid 42 still running") },
	} {
		t.Run(name, func(t *testing.T) {
			inst := createdInstance(t)
			EndOrphans = end
			// Above Linux's highest pid: a host agent that is gone.
			if err := os.WriteFile(inst.PIDPath(), []byte("4194305\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := cleanupStale(inst); err != nil {
				t.Fatalf("cleanup: %v", err)
			}
			if _, err := store.ReadPID(inst.PIDPath()); err == nil {
				t.Error("the stale host agent pid file is left")
			}
		})
	}
}
