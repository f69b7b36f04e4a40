package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// CommandEnv overrides the ssh command (split on spaces), as
// GIT_SSH_COMMAND does for git: `ssh -F ./config`, say.
const CommandEnv = "VMDOCK_SSH_COMMAND"

// Server is one remote engine's server as vmdock reaches it.
type Server struct {
	Target Target
	// Socket is the Docker engine's socket on the server.
	Socket string
	// SSH is the ssh command and its own options; empty: $VMDOCK_SSH_COMMAND,
	// else "ssh".
	SSH []string
}

// sshCommand is the ssh argv up to (and with) the destination; BatchMode
// so a missing key fails at once instead of waiting for a password, and
// server-alive probes so a cut link ends the session within ~15 s.
func (s Server) sshCommand() []string {
	argv := s.SSH
	if len(argv) == 0 {
		argv = strings.Fields(os.Getenv(CommandEnv))
	}
	if len(argv) == 0 {
		argv = []string{"ssh"}
	}
	argv = append(append([]string(nil), argv...),
		"-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
		"-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
		"-T", "-e", "none")
	if s.Target.Port != 0 {
		argv = append(argv, "-p", strconv.Itoa(s.Target.Port))
	}
	if s.Target.User != "" {
		argv = append(argv, "-l", s.Target.User)
	}
	return append(argv, "--", s.Target.Host)
}

// command is ssh running script with sh on the server; args are its $1...
func (s Server) command(ctx context.Context, script string, args ...string) *exec.Cmd {
	line := "sh -c " + shellQuote(script) + " sh"
	for _, a := range args {
		line += " " + shellQuote(a)
	}
	argv := append(s.sshCommand(), line)
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// run runs script on the server with stdin and returns its output; an ssh
// failure comes back as the one-line cause (unreachable, refused key).
func (s Server) run(ctx context.Context, stdin io.Reader, script string, args ...string) ([]byte, error) {
	cmd := s.command(ctx, script, args...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), s.explain(err, errOut.String())
	}
	return out.Bytes(), nil
}

// ErrUnreachable and ErrAuth are the ssh failures a user fixes outside
// vmdock; a lost session is retried, these are not worth retrying fast.
var (
	ErrUnreachable = errors.New("server unreachable")
	ErrAuth        = errors.New("authentication refused")
)

// explain turns ssh's failure into one line naming what failed and what
// to do. ssh exits 255 on its own errors; any other code is the remote
// command's.
func (s Server) explain(err error, stderr string) error {
	last := lastLine(stderr)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return fmt.Errorf("run ssh for %s: %w", s.Target, err)
	}
	if strconv.Itoa(exit.ExitCode()) == helperMissingExit {
		return fmt.Errorf("%s: %w", s.Target, ErrHelperMissing)
	}
	if exit.ExitCode() != 255 {
		if last == "" {
			return fmt.Errorf("on %s: the command exited %d", s.Target, exit.ExitCode())
		}
		return fmt.Errorf("on %s: %s", s.Target, last)
	}
	switch {
	case strings.Contains(stderr, "Permission denied"), strings.Contains(stderr, "Too many authentication failures"):
		return fmt.Errorf("%s: %w: ssh has no key the server takes (BatchMode: no password prompt); add yours to the server's authorized_keys or your ssh-agent, and check `ssh %s true` works", s.Target, ErrAuth, s.Target.Host)
	case strings.Contains(stderr, "Host key verification failed"), strings.Contains(stderr, "REMOTE HOST IDENTIFICATION HAS CHANGED"):
		return fmt.Errorf("%s: %w: the server's host key is not in known_hosts (or changed); run `ssh %s true` once to check and accept it", s.Target, ErrAuth, s.Target.Host)
	case strings.Contains(stderr, "Could not resolve hostname"):
		return fmt.Errorf("%s: %w: the host name does not resolve (%s)", s.Target, ErrUnreachable, last)
	case strings.Contains(stderr, "Connection refused"), strings.Contains(stderr, "No route to host"),
		strings.Contains(stderr, "timed out"), strings.Contains(stderr, "Network is unreachable"),
		strings.Contains(stderr, "Connection closed"), strings.Contains(stderr, "Connection reset"):
		return fmt.Errorf("%s: %w: %s; check the address, the port and that sshd runs there", s.Target, ErrUnreachable, last)
	}
	if last == "" {
		last = "ssh exited 255"
	}
	return fmt.Errorf("%s: ssh failed: %s", s.Target, last)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// shellQuote makes s one word for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
