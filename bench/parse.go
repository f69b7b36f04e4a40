package bench

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// parseVmRSS finds VmRSS in a /proc/<pid>/status text and returns MiB.
func parseVmRSS(status string) (float64, error) { return parseStatusMiB(status, "VmRSS") }

// parseStatusMiB finds a "<field>: <n> kB" line of /proc/<pid>/status and
// returns it in MiB. RssAnon beside VmRSS splits what a Go agent costs
// privately from its binary's pages, which the kernel can drop and re-read.
func parseStatusMiB(status, field string) (float64, error) {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("%s line %q: want \"%s: <n> kB\"", field, line, field)
			}
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("%s line %q: %w", field, line, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s line in process status", field)
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
