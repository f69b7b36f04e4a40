package bench

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// parseVmRSS finds VmRSS in a /proc/<pid>/status text and returns MiB.
func parseVmRSS(status string) (float64, error) {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("VmRSS line %q: want \"VmRSS: <n> kB\"", line)
			}
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS line %q: %w", line, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS line in process status")
}

var (
	ddBytesRe = regexp.MustCompile(`(?m)^(\d+) bytes .*copied, ([0-9.]+(?:e-?\d+)?) s`)
)

// parseDD reads the summary line of GNU or busybox dd and returns the
// bytes copied and the seconds dd itself measured (so exec overhead
// through the agent is not counted).
func parseDD(out string) (int64, float64, error) {
	m := ddBytesRe.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("dd output has no summary line: %q", strings.TrimSpace(out))
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("dd bytes %q: %w", m[1], err)
	}
	s, err := strconv.ParseFloat(m[2], 64)
	if err != nil || s <= 0 {
		return 0, 0, fmt.Errorf("dd seconds %q: not a positive number", m[2])
	}
	return n, s, nil
}
