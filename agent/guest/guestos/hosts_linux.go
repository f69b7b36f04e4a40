package guestos

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// EditHosts replaces the /etc/hosts line starting with key (or appends it).
func (s Sys) EditHosts(key, line string) error {
	p := s.Path("/etc/hosts")
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read /etc/hosts: %w", err)
	}
	var out []string
	done := false
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == key {
			if !done {
				out = append(out, line)
				done = true
			}
			continue
		}
		if l != "" || len(out) > 0 {
			out = append(out, l)
		}
	}
	if !done {
		out = append(out, line)
	}
	return WriteFile(p, []byte(strings.Join(out, "\n")+"\n"), 0o644)
}
