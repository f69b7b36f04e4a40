package instance

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// processInfo asks ps for the command line and start time, and lsof for
// the working folder: macOS has no /proc.
func processInfo(pid int) (procInfo, error) {
	p := strconv.Itoa(pid)
	out, err := exec.Command("ps", "-o", "command=", "-p", p).Output()
	if err != nil {
		return procInfo{}, err
	}
	// ps joins the arguments with spaces; the ones that matter here
	// (hostagent, the flags and the profile name) never contain any.
	info := procInfo{args: strings.Fields(string(out))}
	if out, err := exec.Command("ps", "-o", "lstart=", "-p", p).Output(); err == nil {
		if t, err := time.ParseInLocation("Mon Jan _2 15:04:05 2006", strings.TrimSpace(string(out)), time.Local); err == nil {
			info.start = t
		}
	}
	if cwd, err := lsofCwd(p); err == nil {
		info.cwd = cwd
	}
	return info, nil
}

func lsofCwd(pid string) (string, error) {
	out, err := exec.Command("lsof", "-a", "-p", pid, "-d", "cwd", "-Fn").Output()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(line, "n"); ok {
			return name, nil
		}
	}
	return "", errors.New("lsof named no cwd")
}
