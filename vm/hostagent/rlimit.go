//go:build linux || darwin

package hostagent

import (
	"log/slog"

	"golang.org/x/sys/unix"
)

// raiseFileLimit lifts the soft RLIMIT_NOFILE as far as the OS allows
// (softFileLimit): every forwarded connection and port costs the host agent
// a descriptor, and user sessions still start with a soft limit of 256
// (launchd) or 1024 (most Linux distributions).
func raiseFileLimit() {
	soft, hard, err := setFileLimitToHard()
	if err != nil {
		slog.Warn("raise the open file limit", "err", err, "soft", soft, "hard", hard)
		return
	}
	slog.Debug("open file limit", "soft", soft, "hard", hard)
}

// setFileLimitToHard returns the limits in force afterwards.
func setFileLimitToHard() (soft, hard uint64, err error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, err
	}
	target := softFileLimit(lim.Max)
	if lim.Cur >= target {
		return lim.Cur, lim.Max, nil
	}
	want := unix.Rlimit{Cur: target, Max: lim.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		return lim.Cur, lim.Max, err
	}
	return want.Cur, want.Max, nil
}
