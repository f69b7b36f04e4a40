// Package macos holds the macOS versions vmdock's vz support depends on, so
// the config check, the host probe and the vz plan hold one number each and
// cannot disagree. It is pure Go: every OS builds and tests it.
package macos

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a macOS product version; the patch level never decides a gate.
type Version struct{ Major, Minor int }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports whether v is older than o.
func (v Version) Less(o Version) bool {
	return v.Major < o.Major || v.Major == o.Major && v.Minor < o.Minor
}

// Parse reads a product version as sysctl kern.osproductversion prints it
// ("14.5", "13.6.1", "15").
func Parse(s string) (Version, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	bad := fmt.Errorf("macOS version %q not understood (expected major[.minor[.patch]], e.g. 14.5)", s)
	if len(parts) > 3 {
		return Version{}, bad
	}
	var nums [2]int
	for i, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return Version{}, bad
		}
		if i < 2 {
			nums[i] = n
		}
	}
	return Version{nums[0], nums[1]}, nil
}
