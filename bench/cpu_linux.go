package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmdock/vmdock/internal/procstat"
)

// hostCPU is a host process's user+system CPU time so far.
func hostCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	return procstat.CPUTime(string(b))
}

// hostThreadsCPU is the CPU time so far of each live thread of a host
// process, summed by thread name (QEMU names its threads after their job,
// and its I/O workers share one name).
func hostThreadsCPU(pid int) (map[string]time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("threads of pid %d: %w", pid, err)
	}
	out := map[string]time.Duration{}
	for _, e := range ents {
		comm, cerr := os.ReadFile(filepath.Join(dir, e.Name(), "comm"))
		stat, serr := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		if cerr != nil || serr != nil {
			continue // the thread ended meanwhile
		}
		d, err := procstat.CPUTime(string(stat))
		if err != nil {
			return nil, fmt.Errorf("thread %s of pid %d: %w", e.Name(), pid, err)
		}
		out[strings.TrimSpace(string(comm))] += d
	}
	return out, nil
}
