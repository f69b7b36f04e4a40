package instance

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture, whatever the kernel's own tick rate.
const clockTicks = 100

func processInfo(pid int) (procInfo, error) {
	proc := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return procInfo{}, err
	}
	info := procInfo{args: strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")}
	if cwd, err := os.Readlink(proc + "/cwd"); err == nil {
		info.cwd = cwd
	}
	if t, err := processStart(proc); err == nil {
		info.start = t
	}
	return info, nil
}

// processStart reads field 22 of /proc/<pid>/stat (start time in ticks
// after boot) and adds the boot time from /proc/stat.
func processStart(proc string) (time.Time, error) {
	b, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return time.Time{}, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return time.Time{}, errors.New("malformed " + proc + "/stat")
	}
	fields := strings.Fields(s[end+1:])
	const startField = 22 - 3 // fields[0] is field 3, the state
	if len(fields) <= startField {
		return time.Time{}, errors.New("short " + proc + "/stat")
	}
	ticks, err := strconv.ParseInt(fields[startField], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s/stat start time: %w", proc, err)
	}
	boot, err := bootTime()
	if err != nil {
		return time.Time{}, err
	}
	return boot.Add(time.Duration(ticks) * time.Second / clockTicks), nil
}

func bootTime() (time.Time, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("/proc/stat btime: %w", err)
			}
			return time.Unix(sec, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in /proc/stat")
}
