package hostagent

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A host agent started from a session with a low soft limit gets the
// hard limit.
func TestRaiseFileLimitLiftsALowSoftLimit(t *testing.T) {
	var orig unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max <= 256 {
		t.Skipf("hard limit %d leaves nothing to raise", orig.Max)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &orig) })
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 256, Max: orig.Max}); err != nil {
		t.Fatal(err)
	}
	raiseFileLimit()
	var got unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &got); err != nil {
		t.Fatal(err)
	}
	if got.Cur != orig.Max || got.Max != orig.Max {
		t.Fatalf("limit after raiseFileLimit = %d/%d, want %d/%d", got.Cur, got.Max, orig.Max, orig.Max)
	}
	// Already at the hard limit: nothing to do, nothing fails.
	if soft, hard, err := setFileLimitToHard(); err != nil || soft != hard {
		t.Fatalf("second raise: %d/%d, %v", soft, hard, err)
	}
}
