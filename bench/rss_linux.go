package bench

import (
	"fmt"
	"os"
)

// hostRSS is the resident set of a host process in MiB.
func hostRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	return parseVmRSS(string(b))
}
