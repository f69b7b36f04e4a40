package vm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/vmdock/vmdock/agent"
)

// ControlExecPath upgrades the control connection to a raw agent stream:
// the host agent owns the only channel to the guest, so `vmdock ssh` runs
// its exec through it.
const ControlExecPath = "/v1/exec"

// ExecUpgrade is the Upgrade header value of an exec request.
const ExecUpgrade = "vmdock-agent-stream"

// Exec runs argv in the guest (a login shell when argv is empty) and
// returns the command's exit code. With a terminal on stdin it runs in a
// pty and forwards window size changes.
func Exec(ctx context.Context, inst *Instance, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if _, ok := liveHostAgent(ctx, inst); !ok {
		return -1, fmt.Errorf("instance %q: %w (run `vmdock start`)", inst.Name, ErrNotRunning)
	}
	conn, err := openAgentStream(ctx, inst)
	if err != nil {
		return -1, err
	}
	defer conn.Close()

	req := agent.ExecRequest{Argv: argv}
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

// openAgentStream asks the host agent for a raw stream to the guest agent.
func openAgentStream(ctx context.Context, inst *Instance) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", inst.ControlSocketPath())
	if err != nil {
		return nil, fmt.Errorf("connect to host agent: %w", err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: hostagent\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", ControlExecPath, ExecUpgrade)
	// Read the response head byte by byte: anything buffered past it
	// belongs to the agent stream.
	var head bytes.Buffer
	one := make([]byte, 1)
	for !bytes.HasSuffix(head.Bytes(), []byte("\r\n\r\n")) {
		if head.Len() > 8192 {
			conn.Close()
			return nil, fmt.Errorf("host agent: response head too long")
		}
		if _, err := conn.Read(one); err != nil {
			conn.Close()
			return nil, fmt.Errorf("host agent exec upgrade: %w", err)
		}
		head.WriteByte(one[0])
	}
	status := strings.SplitN(head.String(), "\r\n", 2)[0]
	if !strings.Contains(status, " 101 ") {
		conn.Close()
		return nil, fmt.Errorf("host agent refused exec: %s", status)
	}
	return conn, nil
}
