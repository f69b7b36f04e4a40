//go:build !linux

package qemu

import (
	"errors"
	"time"
)

// errNoProc: the figures come from /proc; on macOS they would need
// proc_pidinfo, which nobody has asked for while vz is the Mac's driver.
var errNoProc = errors.New("read from /proc, which this OS does not have")

func readSmaps(int) ([]mapping, error) { return nil, errNoProc }

func readCPUTime(int) (time.Duration, error) { return 0, errNoProc }
