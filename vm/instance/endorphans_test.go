package instance

import (
	"os"
	"testing"

	"github.com/vmdock/vmdock/vm/qemu"
	"github.com/vmdock/vmdock/vm/store"
)

// A dead host agent's QEMU leftovers are ended by the instance layer
// itself (qemu.CleanupOrphans): its pid file (here one naming no process,
// so nothing is killed) and its stale QMP socket are gone after the
// cleanup a plain start or stop runs.
func TestEndOrphansEndsQEMULeftovers(t *testing.T) {
	inst, err := store.Open(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Create(); err != nil {
		t.Fatal(err)
	}
	pidFile, qmp := qemu.PIDFilePath(inst.Dir), qemu.QMPSocketPath(inst.Dir)
	for _, p := range []string{pidFile, qmp} {
		if err := os.WriteFile(p, []byte("garbage\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := cleanupStale(inst); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{pidFile, qmp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after the cleanup: %v", p, err)
		}
	}
}

// An instance with no QEMU leftovers (vz, or a clean stop) has nothing to
// end, and the cleanup says nothing is wrong.
func TestEndOrphansWithoutLeftovers(t *testing.T) {
	inst, err := store.Open(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Create(); err != nil {
		t.Fatal(err)
	}
	if err := cleanupStale(inst); err != nil {
		t.Fatalf("cleanup of a clean instance folder: %v", err)
	}
}
