package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/vmdock/vmdock/vm/control"
)

// HomeEnv overrides the vmdock home folder (default ~/.vmdock).
const HomeEnv = "VMDOCK_HOME"

var profileRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Home is $VMDOCK_HOME, or ~/.vmdock. It is not created here.
func Home() (string, error) {
	if h := os.Getenv(HomeEnv); h != "" {
		abs, err := filepath.Abs(h)
		if err != nil {
			return "", fmt.Errorf("$%s %q: %w", HomeEnv, h, err)
		}
		return abs, nil
	}
	u, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the home folder (set $%s): %w", HomeEnv, err)
	}
	return filepath.Join(u, ".vmdock"), nil
}

// ValidateProfile accepts names that are safe as a folder name and in a
// docker context name.
func ValidateProfile(name string) error {
	if !profileRE.MatchString(name) {
		return fmt.Errorf("profile %q is not accepted; accepted: 1-63 of a-z 0-9 . _ - starting with a letter or digit", name)
	}
	return nil
}

// Open names the instance of profile under home. It checks the
// name but creates nothing, so a rejected command leaves no trace.
func Open(home, profile string) (*Instance, error) {
	if err := ValidateProfile(profile); err != nil {
		return nil, err
	}
	return &Instance{Name: profile, Dir: filepath.Join(home, profile)}, nil
}

// Exists reports whether the instance has been created (it has a config).
func (i *Instance) Exists() bool {
	_, err := os.Stat(i.ConfigPath())
	return err == nil
}

// Create makes the instance folder (and home) with mode 0700: sockets and
// disks in it are nobody else's business.
func (i *Instance) Create() error {
	if err := os.MkdirAll(filepath.Dir(i.Dir), 0o700); err != nil {
		return fmt.Errorf("create vmdock home %s: %w", filepath.Dir(i.Dir), err)
	}
	if err := os.Mkdir(i.Dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create instance folder %s: %w", i.Dir, err)
	}
	if err := os.Chmod(i.Dir, 0o700); err != nil {
		return fmt.Errorf("create instance folder %s: %w", i.Dir, err)
	}
	return nil
}

// List returns every instance under home (folders with a valid
// profile name and a config), sorted by name. A missing home is no instances.
func List(home string) ([]*Instance, error) {
	entries, err := os.ReadDir(home)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list instances in %s: %w", home, err)
	}
	var out []*Instance
	for _, e := range entries {
		if !e.IsDir() || ValidateProfile(e.Name()) != nil {
			continue
		}
		inst := &Instance{Name: e.Name(), Dir: filepath.Join(home, e.Name())}
		if inst.Exists() {
			out = append(out, inst)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// States of an instance, derived from live checks only. Starting and
// Stopping are a live host agent that is booting or shutting down.
const (
	StateRunning  = "Running"
	StateStarting = "Starting"
	StateStopping = "Stopping"
	StateStopped  = "Stopped"
	StateBroken   = "Broken"
)

// InstanceStatus is the live state of an instance.
type InstanceStatus struct {
	State     string          `json:"status"`           // Running, Stopped or Broken
	Reason    string          `json:"reason,omitempty"` // why Broken
	PID       int             `json:"pid,omitempty"`    // host agent pid
	HostAgent *control.Status `json:"hostAgent,omitempty"`
	LastError string          `json:"lastError,omitempty"` // why the last host agent ended abnormally
}

// String is "Running", "Stopped", "Starting: <step>" or "Broken: <reason>".
func (s InstanceStatus) String() string {
	switch {
	case s.State == StateBroken:
		return StateBroken + ": " + s.Reason
	case s.State == StateStarting && s.HostAgent != nil && s.HostAgent.Step != "":
		return StateStarting + ": " + s.HostAgent.Step
	}
	return s.State
}

// Status checks the host agent pid and asks its control socket. Running
// needs both; Stopped needs neither to exist; anything else is Broken.
func (i *Instance) Status(ctx context.Context) InstanceStatus {
	pid, pidErr := ReadPID(i.PIDPath())
	_, sockErr := os.Lstat(i.ControlSocketPath())
	sockExists := sockErr == nil
	if errors.Is(pidErr, os.ErrNotExist) && !sockExists {
		// The host agent left a reason when the VM failed: Broken until a
		// start or stop clears it, so a failure is never mistaken for a stop.
		if b, err := os.ReadFile(i.BrokenPath()); err == nil {
			reason := strings.TrimSpace(string(b))
			return InstanceStatus{State: StateBroken, Reason: reason, LastError: reason}
		}
		return InstanceStatus{State: StateStopped}
	}
	broken := func(format string, args ...any) InstanceStatus {
		return InstanceStatus{State: StateBroken, PID: pid, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case errors.Is(pidErr, os.ErrNotExist):
		return broken("stale control socket %s without a host agent pid file", i.ControlSocketPath())
	case pidErr != nil:
		return broken("unreadable pid file %s: %v", i.PIDPath(), pidErr)
	case !ProcessAlive(pid):
		return broken("stale pid file: host agent pid %d is not running", pid)
	case !sockExists:
		return broken("host agent pid %d is alive but has no control socket", pid)
	}
	st, err := control.NewClient(i.ControlSocketPath()).Status(ctx)
	if err != nil {
		return broken("host agent pid %d is alive but its control socket does not answer: %v", pid, err)
	}
	if b, err := os.ReadFile(i.BrokenPath()); err == nil {
		// The VM failed and the host agent is still unwinding.
		reason := strings.TrimSpace(string(b))
		return InstanceStatus{State: StateBroken, PID: pid, Reason: reason, LastError: reason, HostAgent: st}
	}
	return InstanceStatus{State: phaseState(st.Phase), PID: pid, HostAgent: st}
}

// phaseState maps the host agent's phase to the instance's state: it
// answers from the first boot step on, long before Docker does.
func phaseState(phase string) string {
	switch phase {
	case control.PhaseStarting:
		return StateStarting
	case control.PhaseStopping:
		return StateStopping
	}
	return StateRunning
}

// ReadPID reads a pid file; an error for a missing file wraps
// os.ErrNotExist.
func ReadPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("no pid in %q", strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// ProcessAlive: signal 0 checks existence; EPERM means alive but not ours.
func ProcessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
