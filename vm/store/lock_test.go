package store_test

import (
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

func TestLockOtherProcess(t *testing.T) {
	inst := &store.Instance{Name: "x", Dir: t.TempDir()}
	pid, release := storetest.LockInOtherProcess(t, inst.Dir)
	_, err := inst.Lock()
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(pid)) {
		t.Fatalf("Lock while held elsewhere: %v; want store.ErrLocked naming pid %d", err, pid)
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
