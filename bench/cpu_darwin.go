package bench

import (
	"fmt"
	"time"
)

// hostCPU is not measured on macOS yet (it needs proc_pidinfo).
func hostCPU(int) (time.Duration, error) {
	return 0, fmt.Errorf("host process CPU is measured on Linux only")
}

// hostThreadsCPU is not measured on macOS either.
func hostThreadsCPU(int) (map[string]time.Duration, error) {
	return nil, fmt.Errorf("host thread CPU is measured on Linux only")
}
