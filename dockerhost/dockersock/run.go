package dockersock

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ExecRunner runs commands as processes, through sudo when Sudo is set,
// and prints each command line to Echo first so the user sees what runs
// with their privileges.
type ExecRunner struct {
	Sudo bool
	Echo io.Writer // nil: silent
	// LookPath finds sudo; nil is exec.LookPath.
	LookPath func(string) (string, error)
}

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, argv ...string) error {
	if r.Sudo {
		look := r.LookPath
		if look == nil {
			look = exec.LookPath
		}
		if _, err := look("sudo"); err != nil {
			return fmt.Errorf("`%s` needs root and sudo is not installed: run vmdock as root, or set %s to a path you can write", quote(argv), PathEnv)
		}
		argv = append([]string{"sudo"}, argv...)
	}
	if r.Echo != nil {
		fmt.Fprintf(r.Echo, "running: %s\n", quote(argv))
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = os.Stdin // sudo may ask for a password
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("%s: %w: %s", quote(argv), err, msg)
		}
		return fmt.Errorf("%s: %w", quote(argv), err)
	}
	return nil
}

// NewLinker is the Linker for this machine: commands through sudo unless
// vmdock runs as root or may write the link's folder itself, each
// command line printed to echo first. Both paths are made absolute: the
// link's target must not depend on the folder vmdock ran in.
func NewLinker(path, home string, echo io.Writer) (*Linker, error) {
	absHome, err := filepath.Abs(home)
	if err != nil {
		return nil, fmt.Errorf("vmdock home %s: %w", home, err)
	}
	absPath, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("docker socket link path %s: %w", path, err)
	}
	sudo := os.Geteuid() != 0 && unix.Access(filepath.Dir(absPath), unix.W_OK) != nil
	return &Linker{Path: absPath, Home: absHome, Run: ExecRunner{Sudo: sudo, Echo: echo}}, nil
}
