package vm

import (
	"os"
	"strconv"
	"strings"
)

// isHostAgent guards against killing an unrelated process that reused a
// stale pid.
func isHostAgent(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(b), "hostagent")
}
