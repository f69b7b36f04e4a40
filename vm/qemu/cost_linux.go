package qemu

import (
	"fmt"
	"os"
	"time"

	"github.com/vmdock/vmdock/internal/procstat"
)

func readSmaps(pid int) ([]mapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseSmaps(f)
}

func readCPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return procstat.CPUTime(string(b))
}
