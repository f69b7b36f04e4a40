// Package storetest holds an instance's lock in another process, for tests
// of what a second vmdock command sees while the first holds the profile.
package storetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/store"
)

const dirEnv = "VMDOCK_TEST_LOCK_DIR"

// ServeLock is the body of a test named TestLockHelper in the calling
// package: in the child process LockInOtherProcess starts, it takes the
// lock and holds it until its stdin closes; in a normal test run it skips.
func ServeLock(t *testing.T) {
	dir := os.Getenv(dirEnv)
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

// LockInOtherProcess has the test binary's TestLockHelper (which calls
// ServeLock) take dir's lock in a child process; release lets it go and
// waits for the child to exit.
func LockInOtherProcess(t *testing.T, dir string) (pid int, release func() error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelper$")
	cmd.Env = append(os.Environ(), dirEnv+"="+dir)
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
