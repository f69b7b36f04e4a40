package instance

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"
)

// Exec runs argv in the guest (a login shell when argv is empty) and
// returns the command's exit code. With a terminal on stdin it runs in a
// pty and forwards window size changes.
func Exec(ctx context.Context, inst *store.Instance, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return ExecIn(ctx, inst, "", argv, stdin, stdout, stderr)
}

// ExecIn is Exec with dir, a guest folder, as the working folder ("" for
// the agent's own).
func ExecIn(ctx context.Context, inst *store.Instance, dir string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if _, ok := liveHostAgent(ctx, inst); !ok {
		return -1, fmt.Errorf("instance %q: %w (run `vmdock start`)", inst.Name, ErrNotRunning)
	}
	conn, err := control.NewClient(inst.ControlSocketPath()).OpenStream(ctx)
	if err != nil {
		return -1, err
	}
	defer conn.Close()

	req := agent.ExecRequest{Argv: argv, Dir: dir}
	if len(argv) == 0 {
		req.Argv = []string{"/bin/bash", "-l"}
	}
	var resize chan [2]uint16
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		req.TTY = true
		if cols, rows, err := term.GetSize(int(f.Fd())); err == nil {
			req.Rows, req.Cols = rows, cols
		}
		if t := os.Getenv("TERM"); t != "" {
			req.Env = map[string]string{"TERM": t}
		}
		old, err := term.MakeRaw(int(f.Fd()))
		if err == nil {
			defer term.Restore(int(f.Fd()), old)
		}
		resize = make(chan [2]uint16, 1)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if cols, rows, err := term.GetSize(int(f.Fd())); err == nil {
					select {
					case resize <- [2]uint16{uint16(rows), uint16(cols)}:
					default:
					}
				}
			}
		}()
	}
	return agent.ExecStream(ctx, conn, req, stdin, stdout, stderr, resize)
}
