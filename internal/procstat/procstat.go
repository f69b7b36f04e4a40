// Package procstat reads the numbers of a Linux /proc/<pid>/stat line. It
// parses text only, so it builds and is tested on every OS; reading the
// file is the caller's.
package procstat

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// UserHZ is the unit of the line's times: the kernel exports them in
// USER_HZ, 100 on every architecture vmdock runs on, whatever the kernel's
// own tick rate (reading sysconf(_SC_CLK_TCK) would need cgo).
const UserHZ = 100

// Fields proc(5) numbers from 1: what CPUTime and StartTime read.
const (
	fieldUtime     = 14
	fieldStime     = 15
	fieldStartTime = 22
)

// CPUTime is the process's user plus system CPU time so far (utime plus
// stime).
func CPUTime(stat string) (time.Duration, error) {
	f, err := fieldsFrom(stat, fieldStime)
	if err != nil {
		return 0, err
	}
	utime, err := number(f, fieldUtime)
	if err != nil {
		return 0, err
	}
	stime, err := number(f, fieldStime)
	if err != nil {
		return 0, err
	}
	return ticks(utime + stime), nil
}

// StartTime is when the process started, after the system booted.
func StartTime(stat string) (time.Duration, error) {
	f, err := fieldsFrom(stat, fieldStartTime)
	if err != nil {
		return 0, err
	}
	start, err := number(f, fieldStartTime)
	if err != nil {
		return 0, err
	}
	return ticks(start), nil
}

// fieldsFrom splits stat into its fields from field 3 (the state) on,
// and checks there are at least up to field last. The command name (field
// 2) may hold spaces and parentheses, so they start after its last ')'.
func fieldsFrom(stat string, last int) ([]string, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("stat line %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < last-2 {
		return nil, fmt.Errorf("stat line %q: %d fields after the command name, want at least %d", stat, len(f), last-2)
	}
	return f, nil
}

// number is field n of fields as fieldsFrom split them.
func number(fields []string, n int) (uint64, error) {
	v, err := strconv.ParseUint(fields[n-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat field %d: %w", n, err)
	}
	return v, nil
}

func ticks(n uint64) time.Duration { return time.Duration(n) * time.Second / UserHZ }
