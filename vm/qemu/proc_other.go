//go:build !linux

package qemu

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
)

// nameOptions is empty: QEMU builds that cannot name their threads print a
// warning for debug-threads=on, and the per-thread look is a Linux one.
const nameOptions = ""

// sysProcAttr puts the child in its own process group so a terminal's
// Ctrl-C reaches only the host agent, which then shuts the VM down in
// order. Without Pdeathsig, pid files plus CleanupOrphans end children that
// outlive a crashed host agent.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// processCmdline returns pid's command line from ps, or "" when pid is
// gone.
func processCmdline(pid int) (string, error) {
	out, err := exec.Command("ps", "-ww", "-o", "command=", "-p", fmt.Sprint(pid)).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", nil // ps exits 1 when the pid does not exist
		}
		return "", fmt.Errorf("ps for pid %d: %w", pid, err)
	}
	return strings.TrimSpace(string(out)), nil
}
