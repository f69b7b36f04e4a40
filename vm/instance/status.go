package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"
)

// States of an instance, derived from live checks only. Starting and
// Stopping are a live host agent that is booting or shutting down.
const (
	StateRunning  = "Running"
	StateStarting = "Starting"
	StateStopping = "Stopping"
	StateStopped  = "Stopped"
	StateBroken   = "Broken"
)

// LiveStatus is the live state of an instance.
type LiveStatus struct {
	State     string          `json:"status"`           // Running, Stopped or Broken
	Reason    string          `json:"reason,omitempty"` // why Broken
	PID       int             `json:"pid,omitempty"`    // host agent pid
	HostAgent *control.Status `json:"hostAgent,omitempty"`
	LastError string          `json:"lastError,omitempty"` // why the last host agent ended abnormally
}

// String is "Running", "Stopped", "Starting: <step>" or "Broken: <reason>".
func (s LiveStatus) String() string {
	switch {
	case s.State == StateBroken:
		return StateBroken + ": " + s.Reason
	case s.State == StateStarting && s.HostAgent != nil && s.HostAgent.Step != "":
		return StateStarting + ": " + s.HostAgent.Step
	}
	return s.State
}

// Status checks inst's host agent pid and asks its control socket.
// Running needs both; Stopped needs neither to exist; anything else is
// Broken.
func Status(ctx context.Context, inst *store.Instance) LiveStatus {
	pid, pidErr := store.ReadPID(inst.PIDPath())
	_, sockErr := os.Lstat(inst.ControlSocketPath())
	sockExists := sockErr == nil
	if errors.Is(pidErr, os.ErrNotExist) && !sockExists {
		// The host agent left a reason when the VM failed: Broken until a
		// start or stop clears it, so a failure is never mistaken for a stop.
		if b, err := os.ReadFile(inst.BrokenPath()); err == nil {
			reason := strings.TrimSpace(string(b))
			return LiveStatus{State: StateBroken, Reason: reason, LastError: reason}
		}
		return LiveStatus{State: StateStopped}
	}
	broken := func(format string, args ...any) LiveStatus {
		return LiveStatus{State: StateBroken, PID: pid, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case errors.Is(pidErr, os.ErrNotExist):
		return broken("stale control socket %s without a host agent pid file", inst.ControlSocketPath())
	case pidErr != nil:
		return broken("unreadable pid file %s: %v", inst.PIDPath(), pidErr)
	case !processAlive(pid):
		return broken("stale pid file: host agent pid %d is not running", pid)
	case !sockExists:
		return broken("host agent pid %d is alive but has no control socket", pid)
	}
	st, err := control.NewClient(inst.ControlSocketPath()).Status(ctx)
	if err != nil {
		return broken("host agent pid %d is alive but its control socket does not answer: %v", pid, err)
	}
	if b, err := os.ReadFile(inst.BrokenPath()); err == nil {
		// The VM failed and the host agent is still unwinding.
		reason := strings.TrimSpace(string(b))
		return LiveStatus{State: StateBroken, PID: pid, Reason: reason, LastError: reason, HostAgent: st}
	}
	return LiveStatus{State: phaseState(st.Phase), PID: pid, HostAgent: st}
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

// processAlive: signal 0 checks existence; EPERM means alive but not ours.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
