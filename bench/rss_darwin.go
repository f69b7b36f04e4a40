package bench

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// hostRSS is the resident set of a host process in MiB; macOS has no
// /proc, ps reports KiB, and has no private figure.
func hostRSS(pid int) (rss, private float64, hasPrivate bool, err error) {
	out, err := exec.Command("ps", "-o", "rss=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0, 0, false, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	kb, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return 0, 0, false, fmt.Errorf("rss of pid %d: ps said %q", pid, out)
	}
	return kb / 1024, 0, false, nil
}
