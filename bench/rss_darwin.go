package bench

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// hostRSS is the resident set of a host process in MiB; macOS has no
// /proc, ps reports KiB.
func hostRSS(pid int) (float64, error) {
	out, err := exec.Command("ps", "-o", "rss=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	kb, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return 0, fmt.Errorf("rss of pid %d: ps said %q", pid, out)
	}
	return kb / 1024, nil
}

// hostPrivateRSS: ps has no private figure on macOS.
func hostPrivateRSS(int) (float64, bool, error) { return 0, false, nil }
