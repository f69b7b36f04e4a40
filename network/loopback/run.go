// Package loopback puts an extra IPv4 address (10.254.254.254 by default)
// on the host's loopback interface, optionally for every boot, and undoes
// exactly what it did. Every system change goes through a Runner, so tests
// run the real commands inside a network namespace they create.
package loopback

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Runner runs one command and returns its stdout.
type Runner interface {
	Run(ctx context.Context, stdin []byte, argv ...string) ([]byte, error)
}

// ExecRunner runs commands as processes, behind Prefix (e.g. `ip netns
// exec NS`) and sudo when Sudo is set, and prints every command line it
// runs to Echo so the user sees exactly what is done with their
// privileges.
type ExecRunner struct {
	Prefix []string
	Sudo   bool
	Echo   io.Writer // nil: silent
}

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	full := append([]string{}, r.Prefix...)
	if r.Sudo {
		full = append([]string{"sudo"}, full...)
	}
	full = append(full, argv...)
	if r.Echo != nil {
		fmt.Fprintf(r.Echo, "running: %s\n", strings.Join(full, " "))
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return stdout.Bytes(), fmt.Errorf("%s: %w", strings.Join(full, " "), err)
		}
		return stdout.Bytes(), fmt.Errorf("%s: %w: %s", strings.Join(full, " "), err, msg)
	}
	return stdout.Bytes(), nil
}
