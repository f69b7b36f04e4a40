package guestos

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MountEntry is one line of /proc/self/mountinfo.
type MountEntry struct {
	Target string
	FSType string
	Source string
}

// ReadMounts parses mountinfo: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw".
func ReadMounts(path string) ([]MountEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var out []MountEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 2 {
			continue
		}
		out = append(out, MountEntry{Target: unescapeMount(a[4]), FSType: b[0], Source: unescapeMount(b[1])})
	}
	return out, sc.Err()
}

// unescapeMount undoes the kernel's octal escapes (\040 for a space), which
// matter for shares such as "/home/me/my project".
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
