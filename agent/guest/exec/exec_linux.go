package exec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/vmdock/vmdock/agent"
)

// Runner runs the commands the host asks for (vmdock ssh, vmdock nerdctl)
// on an exec stream, with a terminal or pipes.
type Runner struct {
	// ProxyVars puts the proxy variables under a request's environment;
	// nil: none.
	ProxyVars func(env map[string]string) map[string]string
}

// Serve answers an exec request on st: the command's output and exit go
// back as frames, the host's input and resizes come in as frames.
func (s *Runner) Serve(ctx context.Context, st net.Conn, req agent.Request) {
	defer st.Close()
	if req.Exec == nil || len(req.Exec.Argv) == 0 {
		_ = agent.Reply(st, errors.New("exec: empty command"))
		return
	}
	if d := req.Exec.Dir; d != "" {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			_ = agent.Reply(st, fmt.Errorf("exec: working folder %s is not a folder in the guest", d))
			return
		}
	}
	if err := agent.Reply(st, nil); err != nil {
		return
	}
	fw := agent.NewFrameWriter(st)
	code, err := s.runExec(st, fw, *req.Exec)
	ex := agent.ExecExit{Code: code}
	if err != nil {
		ex = agent.ExecExit{Code: -1, Error: err.Error()}
	}
	b, _ := json.Marshal(ex)
	_ = fw.WriteFrame(agent.FrameExit, b)
}

func execCmd(r agent.ExecRequest) *osexec.Cmd {
	cmd := osexec.Command(r.Argv[0], r.Argv[1:]...)
	cmd.Dir = r.Dir
	cmd.Env = os.Environ()
	if os.Getenv("PATH") == "" {
		cmd.Env = append(cmd.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	for k, v := range r.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if r.TTY {
		if r.Rows > 0 && r.Cols > 0 {
			// TERM matters to full-screen programs; the host's value wins
			// when it sent one.
			cmd.Env = append([]string{"TERM=xterm-256color"}, cmd.Env...)
		}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		// A daemon started by the command may keep stdout open forever.
		cmd.WaitDelay = 2 * time.Second
	}
	return cmd
}

// execProc is a started command and the ends the host's frames feed.
type execProc struct {
	cmd     *osexec.Cmd
	tty     bool
	stdin   io.WriteCloser
	ptmx    *os.File      // the terminal's controlling side; nil without a tty
	outDone chan struct{} // closed once the output is all sent
}

// runExec runs the command and returns its exit code; err means it could
// not start. When the host goes away the process group is killed.
func (s *Runner) runExec(st net.Conn, fw *agent.FrameWriter, r agent.ExecRequest) (int, error) {
	if s.ProxyVars != nil {
		r.Env = s.ProxyVars(r.Env)
	}
	start := startExecPipes
	if r.TTY {
		start = startExecPTY
	}
	p, err := start(execCmd(r), fw, r)
	if err != nil {
		return -1, err
	}
	if p.ptmx != nil {
		defer p.ptmx.Close()
	}
	exited := make(chan struct{})
	go p.relayInput(st, exited)
	err = p.cmd.Wait()
	close(exited)
	select {
	case <-p.outDone:
	case <-time.After(2 * time.Second):
		// A background child still holds the terminal; don't wait for it.
	}
	return execExitCode(r.Argv[0], err)
}

// startExecPTY starts cmd on a new terminal whose output goes to the host
// as stdout frames.
func startExecPTY(cmd *osexec.Cmd, fw *agent.FrameWriter, r agent.ExecRequest) (*execProc, error) {
	ws := &pty.Winsize{Rows: uint16(r.Rows), Cols: uint16(r.Cols)}
	if ws.Rows == 0 || ws.Cols == 0 {
		ws = &pty.Winsize{Rows: 24, Cols: 80}
	}
	ptmx, err := pty.StartWithSize(cmd, ws)
	if err != nil {
		return nil, fmt.Errorf("start %s with a pty: %w", r.Argv[0], err)
	}
	p := &execProc{cmd: cmd, tty: true, stdin: ptmx, ptmx: ptmx, outDone: make(chan struct{})}
	go func() {
		// EIO ends the copy once the process and its children closed the
		// terminal.
		_, _ = io.Copy(fw.Writer(agent.FrameStdout), ptmx)
		close(p.outDone)
	}()
	return p, nil
}

// startExecPipes starts cmd with its stdout and stderr sent to the host as
// frames.
func startExecPipes(cmd *osexec.Cmd, fw *agent.FrameWriter, r agent.ExecRequest) (*execProc, error) {
	cmd.Stdout = fw.Writer(agent.FrameStdout)
	cmd.Stderr = fw.Writer(agent.FrameStderr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", r.Argv[0], err)
	}
	outDone := make(chan struct{})
	close(outDone) // cmd.Wait drains the output copies itself
	return &execProc{cmd: cmd, stdin: stdin, outDone: outDone}, nil
}

// relayInput applies the host's stdin, end-of-input and resize frames to
// the process until the stream ends; a stream ending before exited closes
// means the host is gone, and the process group is killed.
func (p *execProc) relayInput(st net.Conn, exited <-chan struct{}) {
	pid := p.cmd.Process.Pid
	var once sync.Once
	closeStdin := func() { once.Do(func() { p.stdin.Close() }) }
	for {
		kind, payload, err := agent.ReadFrame(st)
		if err != nil {
			select {
			case <-exited:
			default:
				// The host is gone: nobody will read the output.
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			if !p.tty {
				closeStdin()
			}
			return
		}
		switch kind {
		case agent.FrameStdin:
			_, _ = p.stdin.Write(payload)
		case agent.FrameStdinEOF:
			if p.tty {
				_, _ = p.stdin.Write([]byte{4}) // ^D: EOF for the line discipline
			} else {
				closeStdin()
			}
		case agent.FrameResize:
			if rows, cols, err := agent.ParseResize(payload); err == nil && p.ptmx != nil {
				_ = pty.Setsize(p.ptmx, &pty.Winsize{Rows: rows, Cols: cols})
			}
		}
	}
}

// execExitCode turns cmd.Wait's error into the exit code the host sees: a
// signal's death is 128+signal, as in a shell.
func execExitCode(name string, err error) (int, error) {
	var ee *osexec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	default:
		return -1, fmt.Errorf("wait for %s: %w", name, err)
	}
}
