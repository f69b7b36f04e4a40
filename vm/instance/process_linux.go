package instance

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vmdock/vmdock/internal/procstat"
)

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

// processStart reads the start time after boot from /proc/<pid>/stat
// and adds the boot time from /proc/stat.
func processStart(proc string) (time.Time, error) {
	b, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return time.Time{}, err
	}
	sinceBoot, err := procstat.StartTime(string(b))
	if err != nil {
		return time.Time{}, fmt.Errorf("%s/stat: %w", proc, err)
	}
	boot, err := bootTime()
	if err != nil {
		return time.Time{}, err
	}
	return boot.Add(sinceBoot), nil
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
