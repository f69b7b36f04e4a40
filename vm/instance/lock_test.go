package instance

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/layout"
	"github.com/vmdock/vmdock/vm/store"
	"github.com/vmdock/vmdock/vm/store/storetest"
)

// TestLockHelper is not a test: it is the other process of
// storetest.LockInOtherProcess.
func TestLockHelper(t *testing.T) { storetest.ServeLock(t) }

// A lock held while the instance is not starting is store's plain busy
// error, naming the holder; a free lock is taken.
func TestLockBusyNotStarting(t *testing.T) {
	inst := shortInstance(t)
	pid, release := storetest.LockInOtherProcess(t, inst.Dir)
	_, err := Lock(context.Background(), inst)
	var busy *store.BusyError
	if !errors.Is(err, store.ErrLocked) || !errors.As(err, &busy) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(pid)) || strings.Contains(err.Error(), "starting") {
		t.Fatalf("Lock of a stopped instance held elsewhere: %v; want store's busy error naming pid %d", err, pid)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	l, err := Lock(context.Background(), inst)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	l.Unlock()
}

// Taking the lock brings an older folder to the current format before
// the command writes; a folder a newer vmdock made is refused before the
// lock file is even made.
func TestLockMigratesOlderAndRefusesNewerFolders(t *testing.T) {
	inst := shortInstance(t)
	if err := os.WriteFile(inst.DataDiskPath(), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Lock(context.Background(), inst)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	if rt, err := os.ReadFile(inst.DataRuntimePath()); err != nil || string(rt) != "docker\n" {
		t.Errorf("data.runtime %q (%v): the older folder was not migrated", rt, err)
	}
	if f, err := layout.Detect(inst); err != nil || f != layout.Current {
		t.Errorf("format %d after the lock (%v), want %d", f, err, layout.Current)
	}

	newer := shortInstance(t)
	if err := os.WriteFile(newer.FormatPath(), []byte(`{"format":99,"writtenBy":"v7.0.0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(context.Background(), newer); err == nil || !strings.Contains(err.Error(), "made by vmdock v7.0.0, upgrade") {
		t.Errorf("Lock of a newer folder = %v, want it refused", err)
	}
	if _, err := os.Stat(newer.LockPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the newer folder got a lock file (%v)", err)
	}
}
