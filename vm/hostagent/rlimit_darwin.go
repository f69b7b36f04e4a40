package hostagent

import (
	"log/slog"

	"golang.org/x/sys/unix"
)

// raiseFileLimit lifts the soft RLIMIT_NOFILE as far as macOS allows:
// every forwarded connection and port costs the host agent a descriptor, and launchd
// starts user sessions with a soft limit of 256. The hard limit is often
// RLIM_INFINITY, which setrlimit refuses for the soft limit, so the
// kernel's per-process ceiling (kern.maxfilesperproc) caps it.
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
	target := lim.Max
	if perProc, err := unix.SysctlUint32("kern.maxfilesperproc"); err == nil && uint64(perProc) < target {
		target = uint64(perProc)
	}
	if lim.Cur >= target {
		return lim.Cur, lim.Max, nil
	}
	want := unix.Rlimit{Cur: target, Max: lim.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		return lim.Cur, lim.Max, err
	}
	return want.Cur, want.Max, nil
}
