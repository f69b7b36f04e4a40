package hostagent

import (
	"time"

	"golang.org/x/sys/unix"
)

// linuxClocks: CLOCK_BOOTTIME counts the time suspended, CLOCK_MONOTONIC
// does not, so their difference grows by exactly each sleep.
func linuxClocks() (boot, mono time.Duration, err error) {
	var b, m unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &b); err != nil {
		return 0, 0, err
	}
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &m); err != nil {
		return 0, 0, err
	}
	return time.Duration(b.Nano()), time.Duration(m.Nano()), nil
}

var defaultClocks hostClocks = linuxClocks
