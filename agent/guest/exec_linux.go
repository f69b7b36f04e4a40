package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/vmdock/vmdock/agent"
)

func (s *Server) exec(ctx context.Context, st net.Conn, req agent.Request) {
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

func execCmd(r agent.ExecRequest) *exec.Cmd {
	cmd := exec.Command(r.Argv[0], r.Argv[1:]...)
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

// runExec runs the command and returns its exit code; err means it could
// not start. When the host goes away the process group is killed.
func (s *Server) runExec(st net.Conn, fw *agent.FrameWriter, r agent.ExecRequest) (int, error) {
	r.Env = s.withProxyVars(r.Env)
	cmd := execCmd(r)
	var (
		stdin   io.WriteCloser
		ptmx    *os.File
		outDone = make(chan struct{})
	)
	if r.TTY {
		ws := &pty.Winsize{Rows: uint16(r.Rows), Cols: uint16(r.Cols)}
		if ws.Rows == 0 || ws.Cols == 0 {
			ws = &pty.Winsize{Rows: 24, Cols: 80}
		}
		f, err := pty.StartWithSize(cmd, ws)
		if err != nil {
			return -1, fmt.Errorf("start %s with a pty: %w", r.Argv[0], err)
		}
		ptmx = f
		defer ptmx.Close()
		stdin = ptmx
		go func() {
			// EIO ends the copy once the process and its children closed
			// the terminal.
			_, _ = io.Copy(fw.Writer(agent.FrameStdout), ptmx)
			close(outDone)
		}()
	} else {
		cmd.Stdout = fw.Writer(agent.FrameStdout)
		cmd.Stderr = fw.Writer(agent.FrameStderr)
		p, err := cmd.StdinPipe()
		if err != nil {
			return -1, fmt.Errorf("stdin pipe: %w", err)
		}
		stdin = p
		if err := cmd.Start(); err != nil {
			return -1, fmt.Errorf("start %s: %w", r.Argv[0], err)
		}
		close(outDone) // cmd.Wait drains the output copies itself
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	var once sync.Once
	closeStdin := func() { once.Do(func() { stdin.Close() }) }
	go func() {
		for {
			kind, payload, err := agent.ReadFrame(st)
			if err != nil {
				select {
				case <-exited:
				default:
					// The host is gone: nobody will read the output.
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
				if !r.TTY {
					closeStdin()
				}
				return
			}
			switch kind {
			case agent.FrameStdin:
				_, _ = stdin.Write(payload)
			case agent.FrameStdinEOF:
				if r.TTY {
					_, _ = stdin.Write([]byte{4}) // ^D: EOF for the line discipline
				} else {
					closeStdin()
				}
			case agent.FrameResize:
				if rows, cols, err := agent.ParseResize(payload); err == nil && ptmx != nil {
					_ = pty.Setsize(ptmx, &pty.Winsize{Rows: rows, Cols: cols})
				}
			}
		}
	}()
	err := cmd.Wait()
	close(exited)
	select {
	case <-outDone:
	case <-time.After(2 * time.Second):
		// A background child still holds the terminal; don't wait for it.
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	default:
		return -1, fmt.Errorf("wait for %s: %w", r.Argv[0], err)
	}
}
