//go:build linux || darwin

package images

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"
)

// drawBarEnv makes the test binary draw one bar instead of testing; the
// bar needs a process whose controlling terminal the test chose.
const drawBarEnv = "VMDOCK_TEST_DRAW_BAR"

func TestMain(m *testing.M) {
	if os.Getenv(drawBarEnv) == "1" {
		p := newProgress(os.Stdout, true, "vmdock-arm64.tar.zst", 4<<20)
		_, _ = p.Write(make([]byte, 2<<20))
		p.finish(true)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// drawBarOnTerminal draws a bar in a child process whose controlling
// terminal is a pty of cols columns (pb asks /dev/tty for the width); the
// bar itself goes to a pipe, as CI logs capture it.
func drawBarOnTerminal(t *testing.T, cols uint16) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: cols}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), drawBarEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Run(); err != nil {
		t.Fatalf("draw bar: %v: %s", err, out.String())
	}
	return out.String()
}

// lastFrame is what a terminal shows at the end: the text after the last
// carriage return.
func lastFrame(s string) string {
	s = strings.TrimRight(s, "\r\n")
	return s[strings.LastIndex(s, "\r")+1:]
}

// A terminal that reports zero columns still gets a readable bar, not
// only carriage returns.
func TestProgressBarOnAZeroColumnTerminal(t *testing.T) {
	got := drawBarOnTerminal(t, 0)
	frame := lastFrame(got)
	if !strings.Contains(frame, "vmdock-arm64.tar.zst") || !strings.Contains(frame, "MiB") {
		t.Fatalf("last frame %q (all output %q), want the label and the sizes", frame, got)
	}
	if n := len([]rune(frame)); n > fallbackBarWidth {
		t.Errorf("bar is %d columns, want at most %d", n, fallbackBarWidth)
	}
}

// A terminal's own width is kept.
func TestProgressBarFollowsTheTerminalWidth(t *testing.T) {
	frame := lastFrame(drawBarOnTerminal(t, 60))
	if !strings.Contains(frame, "vmdock-arm64.tar.zst") || len([]rune(frame)) > 60 {
		t.Errorf("last frame %q, want the label within 60 columns", frame)
	}
}
