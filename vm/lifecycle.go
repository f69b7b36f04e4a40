package vm

import (
	"context"
	"errors"
	"io"
)

// StartOptions tune `vmdock start`.
type StartOptions struct {
	Foreground bool      // run the host agent in this process
	Progress   io.Writer // step-by-step progress lines
}

// DeleteOptions tune `vmdock delete`.
type DeleteOptions struct {
	Data  bool // also delete the data disk (docker images, volumes)
	Force bool // kill a running instance first
}

var errNotYet = errors.New("the VM lifecycle is not implemented yet")

// Start boots the instance with cfg (already validated and saved) and
// returns when Docker answers.
func Start(ctx context.Context, inst *Instance, cfg Config, opts StartOptions) error {
	return errNotYet
}

// Stop powers the instance off gracefully; force kills after no wait.
func Stop(ctx context.Context, inst *Instance, force bool) error { return errNotYet }

// Delete removes the instance (stopping it first when Force).
func Delete(ctx context.Context, inst *Instance, opts DeleteOptions) error { return errNotYet }

// Exec runs argv in the guest (a login shell when argv is empty) and
// returns the command's exit code.
func Exec(ctx context.Context, inst *Instance, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return 0, errNotYet
}

// RunHostAgent is the hidden `vmdock hostagent` command's body.
func RunHostAgent(ctx context.Context, inst *Instance) error { return errNotYet }
