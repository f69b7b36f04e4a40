package guestostest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// FakeOS records commands; Results maps a command prefix to an error.
type FakeOS struct {
	mu      sync.Mutex
	Cmds    []string
	Results map[string]error
	Clock   time.Time
	// Hostname is the last name SetHostname was given.
	Hostname string
	// SyscallMounts are the targets mounted through Mount, not mount(8).
	SyscallMounts []string
	// FailFirst makes the next n commands with this prefix fail.
	FailFirst map[string]int
	// Outputs are the stdout of commands with this prefix.
	Outputs map[string]string
}

// ExitErr is a command's non-zero exit.
type ExitErr int

func (e ExitErr) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// ExitCode is the exit status, as guestos.ExitCode reads it.
func (e ExitErr) ExitCode() int { return int(e) }

// Run records the command and answers from FailFirst, Results, Outputs.
func (f *FakeOS) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := strings.Join(append([]string{name}, args...), " ")
	f.Cmds = append(f.Cmds, c)
	for p, n := range f.FailFirst {
		if strings.HasPrefix(c, p) && n > 0 {
			f.FailFirst[p] = n - 1
			return nil, ExitErr(32)
		}
	}
	for p, err := range f.Results {
		if strings.HasPrefix(c, p) {
			return nil, err
		}
	}
	for p, out := range f.Outputs {
		if strings.HasPrefix(c, p) {
			return []byte(out), nil
		}
	}
	return nil, nil
}

// SetClock records t.
func (f *FakeOS) SetClock(t time.Time) error {
	f.mu.Lock()
	f.Clock = t
	f.mu.Unlock()
	return nil
}

// SetHostname records name.
func (f *FakeOS) SetHostname(name string) error {
	f.mu.Lock()
	f.Hostname = name
	f.mu.Unlock()
	return nil
}

// Mount is logged and fails as the mount(8) command it stands for would,
// so Results and FailFirst apply to it too.
func (f *FakeOS) Mount(source, target, fstype string, bind bool) error {
	args := []string{"-t", fstype, source, target}
	if bind {
		args = []string{"--bind", source, target}
	}
	f.mu.Lock()
	f.SyscallMounts = append(f.SyscallMounts, target)
	f.mu.Unlock()
	_, err := f.Run(context.Background(), "mount", args...)
	return err
}

// Ran is the commands run so far, one a line.
func (f *FakeOS) Ran() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.Cmds, "\n")
}
