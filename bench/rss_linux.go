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

// hostPrivateRSS is the part of a host process's resident set that is its
// own (RssAnon), without its binary's pages, in MiB; ok false where the
// system does not tell.
func hostPrivateRSS(pid int) (mib float64, ok bool, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, true, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	mib, err = parseStatusMiB(string(b), "RssAnon")
	return mib, true, err
}
