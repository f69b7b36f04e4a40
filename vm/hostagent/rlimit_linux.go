package hostagent

import (
	"log/slog"

	"golang.org/x/sys/unix"
)

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard limit: every
// forwarded connection and port costs the host agent a descriptor, and
// distributions still start user sessions with a soft limit of 1024. The
// Go runtime does the same at start on Linux; doing it here keeps the host
// agent right whatever runtime builds it, and logs what it got.
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
	if lim.Cur >= lim.Max {
		return lim.Cur, lim.Max, nil
	}
	want := unix.Rlimit{Cur: lim.Max, Max: lim.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		return lim.Cur, lim.Max, err
	}
	return want.Cur, want.Max, nil
}
