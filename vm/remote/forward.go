package remote

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// What a user has without vmdock: OpenSSH's own forwards and the server's
// address as ssh resolves it. The bench measures the instance's session
// against them, so they run through the same ssh command and options.

// Forwarding is one running `ssh -N -L`.
type Forwarding struct {
	cmd    *exec.Cmd
	server Server
	stderr *tailWriter
	exited chan struct{}
	err    error // why ssh ended, set before exited closes
}

// Forward starts OpenSSH forwarding local (a unix socket path or
// host:port on this machine) to remote (one on the server) until Close.
// It returns once ssh runs, not once the forward listens: the caller
// waits for an answer through it. ssh exits at once when the forward
// cannot be set up, and replaces a stale local socket.
func (s Server) Forward(local, remote string) (*Forwarding, error) {
	cmd := s.forwardCommand(local, remote)
	f := &Forwarding{cmd: cmd, server: s, stderr: &tailWriter{}, exited: make(chan struct{})}
	cmd.Stderr = f.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ssh: %w", err)
	}
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = fmt.Errorf("%s: ssh -L ended", s.Target)
		} else {
			err = s.explain(err, f.stderr.String())
		}
		f.err = err
		close(f.exited)
	}()
	return f, nil
}

// Close ends the forward. Its error says why ssh had ended by itself
// before (a refused key, a local address in use); nil when it ran.
func (f *Forwarding) Close() error {
	select {
	case <-f.exited:
		return f.err
	default:
	}
	_ = f.cmd.Process.Kill()
	<-f.exited
	return nil
}

func (s Server) forwardCommand(local, remote string) *exec.Cmd {
	argv := s.beforeHost("-N", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes", "-L", local+":"+remote)
	return exec.Command(argv[0], argv[1:]...)
}

// HostName is the address ssh connects to for the server (`ssh -G`): the
// URL's host after the user's ssh config (a Host alias's HostName).
func (s Server) HostName(ctx context.Context) (string, error) {
	argv := s.beforeHost("-G")
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ssh -G %s: %w: %s", s.Target.Host, err, lastLine(errOut.String()))
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "hostname "); ok && name != "" {
			return name, nil
		}
	}
	return "", fmt.Errorf("ssh -G %s printed no hostname", s.Target.Host)
}

// beforeHost is sshCommand with opts put before the "--" that ends ssh's
// options.
func (s Server) beforeHost(opts ...string) []string {
	argv := s.sshCommand()
	end := slices.Index(argv, "--")
	return slices.Concat(argv[:end], opts, argv[end:])
}
