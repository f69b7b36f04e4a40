package hostagent

import (
	"time"

	"golang.org/x/sys/unix"
)

// darwinClocks: on macOS CLOCK_MONOTONIC goes on while the Mac sleeps and
// CLOCK_UPTIME_RAW stops, so their difference grows by exactly each
// sleep. The same clock pair as on Linux sees every wake the power
// notifications would (a sleep, a dark wake's return), and needs no run
// loop or IOKit callback in a daemon without one.
func darwinClocks() (boot, mono time.Duration, err error) {
	var b, m unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &b); err != nil {
		return 0, 0, err
	}
	if err := unix.ClockGettime(unix.CLOCK_UPTIME_RAW, &m); err != nil {
		return 0, 0, err
	}
	return time.Duration(b.Nano()), time.Duration(m.Nano()), nil
}

var defaultClocks hostClocks = darwinClocks
