package guestos

import (
	"context"
	"strings"
	"testing"
)

// RealOS folds a failed tool's output into the error and keeps its exit
// code, which callers test (blkid's 2 is "no file system").
func TestRealOSRunFailure(t *testing.T) {
	out, err := RealOS{}.Run(context.Background(), "sh", "-c", "echo made; echo broke >&2; exit 3")
	if err == nil || ExitCode(err) != 3 {
		t.Fatalf("Run = %v (exit code %d); want exit code 3", err, ExitCode(err))
	}
	if want := "sh -c echo made; echo broke >&2; exit 3: exit status 3: made\nbroke"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if string(out) != "made\nbroke\n" {
		t.Fatalf("output %q, want stdout and stderr", out)
	}
	// Without output the message ends at the exit status.
	_, err = RealOS{}.Run(context.Background(), "sh", "-c", "exit 4")
	if err == nil || err.Error() != "sh -c exit 4: exit status 4" || ExitCode(err) != 4 {
		t.Fatalf("silent failure: %v (exit code %d)", err, ExitCode(err))
	}
}

func TestRealOSRun(t *testing.T) {
	out, err := RealOS{}.Run(context.Background(), "sh", "-c", "printf ok")
	if err != nil || string(out) != "ok" {
		t.Fatalf("Run = %q, %v", out, err)
	}
	// A tool that could not be started has no exit code.
	_, err = RealOS{}.Run(context.Background(), "vmdock-no-such-tool", "x")
	if err == nil || ExitCode(err) != -1 || !strings.HasPrefix(err.Error(), "vmdock-no-such-tool: ") {
		t.Fatalf("missing tool: %v (exit code %d); want an error without exit code", err, ExitCode(err))
	}
}
