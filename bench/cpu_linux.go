package bench

import (
	"fmt"
	"os"
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
