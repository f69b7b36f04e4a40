package idle

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RunningContainers counts the processes whose parent is a containerd
// shim: each running container's first process, under dockerd and under
// containerd alike. A shim outlives its container only until the runtime
// deletes the task, and then has no child.
func RunningContainers(proc string) (int, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	parent := map[int]int{}
	shims := map[int]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		comm, ppid, ok := parseStat(string(b))
		if !ok {
			continue
		}
		parent[pid] = ppid
		if strings.HasPrefix(comm, "containerd-shim") {
			shims[pid] = true
		}
	}
	n := 0
	for _, ppid := range parent {
		if shims[ppid] {
			n++
		}
	}
	return n, nil
}

// parseStat takes the command name and parent pid from /proc/PID/stat:
// "pid (comm) state ppid ...". The name may hold spaces and parentheses,
// so it ends at the last ')'.
func parseStat(stat string) (comm string, ppid int, ok bool) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := strings.Fields(stat[end+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return "", 0, false
	}
	return stat[open+1 : end], ppid, true
}
