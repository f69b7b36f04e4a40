package guestos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// OS is what the server needs from the guest system beyond files: running
// tools (mount, mkfs, iptables, systemctl), setting the clock and the host
// name. Tests fake it because the real thing needs root inside a VM.
type OS interface {
	// Run runs name with args; a non-zero exit is an error that has an
	// ExitCode() int method.
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
	SetClock(t time.Time) error
	SetHostname(name string) error
	// Mount mounts source (a device) of fstype on target, or with bind
	// binds the folder source there, as mount(8) -t or --bind would.
	Mount(source, target, fstype string, bind bool) error
}

// RealOS runs the real tools.
type RealOS struct{}

// Run runs the command and folds its output into the error.
func (RealOS) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		msg := strings.TrimSpace(out.String())
		if errors.As(err, &ee) {
			return out.Bytes(), &runError{cmd: name + " " + strings.Join(args, " "), code: ee.ExitCode(), out: msg}
		}
		return out.Bytes(), fmt.Errorf("%s: %w", name, err)
	}
	return out.Bytes(), nil
}

// SetClock sets the wall clock (the guest has no NTP: after a restore or a
// host sleep only the host knows the time).
func (RealOS) SetClock(t time.Time) error {
	tv := unix.NsecToTimeval(t.UnixNano())
	if err := unix.Settimeofday(&tv); err != nil {
		return fmt.Errorf("settimeofday: %w", err)
	}
	return nil
}

// SetHostname sets the kernel's host name with sethostname(2): the same
// as hostname(1), without forking a process, which under TCG costs a good
// part of a second.
func (RealOS) SetHostname(name string) error {
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("sethostname %q: %w", name, err)
	}
	return nil
}

// Mount calls mount(2) with no options, as `mount -t fstype source target`
// or `mount --bind source target` would, without forking mount(8).
func (RealOS) Mount(source, target, fstype string, bind bool) error {
	if bind {
		if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount --bind %s %s: %w", source, target, err)
		}
		return nil
	}
	if err := unix.Mount(source, target, fstype, 0, ""); err != nil {
		return fmt.Errorf("mount -t %s %s %s: %w", fstype, source, target, err)
	}
	return nil
}

type runError struct {
	cmd  string
	code int
	out  string
}

func (e *runError) Error() string {
	if e.out == "" {
		return fmt.Sprintf("%s: exit status %d", e.cmd, e.code)
	}
	return fmt.Sprintf("%s: exit status %d: %s", e.cmd, e.code, e.out)
}

func (e *runError) ExitCode() int { return e.code }

// ExitCode returns the exit code in err, or -1 when it is not an exit.
func ExitCode(err error) int {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return -1
}
