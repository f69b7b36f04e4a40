package qemu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// nameOptions name QEMU's threads after their job ("CPU 0/TCG",
// "worker", "IO iothread0") in /proc/<pid>/task/*/comm, so top -H or a
// look at the threads says which one spends the CPU of a paused VM.
const nameOptions = ",debug-threads=on"

// sysProcAttr ties a child's life to the host agent: Pdeathsig kills it
// when the host agent dies (even by SIGKILL), and its own process group
// keeps a terminal's Ctrl-C away from it so shutdown stays orderly.
//
// Pdeathsig fires when the creating OS thread exits; the Go runtime does
// not retire threads that run ordinary goroutines, and CleanupOrphans
// covers the rare case where it does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// processCmdline returns pid's argv joined by spaces, or "" when pid is
// gone or a zombie (whose cmdline is empty).
func processCmdline(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		if os.IsNotExist(err) || errors.Is(err, syscall.ESRCH) {
			return "", nil
		}
		return "", fmt.Errorf("read cmdline of pid %d: %w", pid, err)
	}
	return string(bytes.TrimRight(bytes.ReplaceAll(b, []byte{0}, []byte{' '}), " ")), nil
}
