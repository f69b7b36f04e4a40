package instance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/store"
)

// TestLockHelper is not a test: it is the other process of
// lockInOtherProcess.
func TestLockHelper(t *testing.T) {
	dir := os.Getenv("VMDOCK_TEST_LOCK_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	inst := &store.Instance{Name: "x", Dir: dir}
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

// A lock held while the instance is not starting is store's plain busy
// error, naming the holder; a free lock is taken.
func TestLockBusyNotStarting(t *testing.T) {
	inst := shortInstance(t)
	pid, release := lockInOtherProcess(t, inst.Dir)
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
