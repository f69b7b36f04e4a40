package bench

import (
	"fmt"
	"os"
)

// hostRSS is the resident set of a host process in MiB, and its private
// part (RssAnon, without its binary's pages) where the system tells.
func hostRSS(pid int) (rss, private float64, hasPrivate bool, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, false, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	if rss, err = parseVmRSS(string(b)); err != nil {
		return 0, 0, false, err
	}
	private, err = parseStatusMiB(string(b), "RssAnon")
	return rss, private, err == nil, nil
}
