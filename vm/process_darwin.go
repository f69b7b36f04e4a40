package vm

import (
	"os/exec"
	"strconv"
	"strings"
)

// isHostAgent guards against killing an unrelated process that reused a
// stale pid.
func isHostAgent(pid int) bool {
	out, err := exec.Command("ps", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	return err == nil && strings.Contains(string(out), "hostagent")
}
