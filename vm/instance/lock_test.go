package instance

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

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
