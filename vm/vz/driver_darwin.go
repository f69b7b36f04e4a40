//go:build darwin && cgo

package vz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	vz "github.com/Code-Hex/vz/v3"

	"github.com/vmdock/vmdock/vm/driver"
)

func validate(spec driver.Spec) error {
	host, err := hostInfo()
	if err != nil {
		return err
	}
	_, err = Plan(spec, host)
	return err
}

func start(ctx context.Context, spec driver.Spec) (driver.Machine, error) {
	host, err := hostInfo()
	if err != nil {
		return nil, err
	}
	plan, err := Plan(spec, host)
	if err != nil {
		return nil, err
	}
	cfg, err := configure(plan)
	if err != nil {
		return nil, err
	}
	vm, err := vz.NewVirtualMachine(cfg)
	if err != nil {
		return nil, fmt.Errorf("vz: create machine %s: %w", spec.Name, err)
	}
	m := newMachine(spec.Name, plan, vm)
	if err := vm.Start(); err != nil {
		return nil, fmt.Errorf("vz: start machine %s: %w", spec.Name, err)
	}
	slog.Info("vz machine started", "name", spec.Name, "cpus", plan.CPUs, "memory", plan.MemoryBytes)
	return m, nil
}

// hostInfo asks macOS and vz for the facts Plan decides on.
func hostInfo() (HostInfo, error) {
	ver, err := syscall.Sysctl("kern.osproductversion")
	if err != nil {
		return HostInfo{}, fmt.Errorf("vz: read macOS version: %w", err)
	}
	return HostInfo{
		Arch:         hostArch,
		MacOSVersion: ver,
		Rosetta:      rosettaAvailability(),
		MinCPUs:      int(vz.VirtualMachineConfigurationMinimumAllowedCPUCount()),
		MaxCPUs:      int(vz.VirtualMachineConfigurationMaximumAllowedCPUCount()),
		MinMemoryMiB: max(defaultMinMemoryMiB, int(vz.VirtualMachineConfigurationMinimumAllowedMemorySize()>>20)),
		MaxMemoryMiB: int(vz.VirtualMachineConfigurationMaximumAllowedMemorySize() >> 20),
	}, nil
}

// machine is one running vz VM. A single goroutine drains the state channel
// (vz delivers every change once) and closes done when the VM has stopped.
type machine struct {
	name string
	plan *VMPlan
	vm   *vz.VirtualMachine

	done    chan struct{}
	mu      sync.Mutex
	exitErr error
}

func newMachine(name string, plan *VMPlan, vm *vz.VirtualMachine) *machine {
	m := &machine{name: name, plan: plan, vm: vm, done: make(chan struct{})}
	go m.watch()
	return m
}

func (m *machine) watch() {
	for state := range m.vm.StateChangedNotify() {
		slog.Debug("vz state changed", "name", m.name, "state", state.String())
		switch state {
		case vz.VirtualMachineStateStopped:
			close(m.done)
			return
		case vz.VirtualMachineStateError:
			m.mu.Lock()
			m.exitErr = fmt.Errorf("vz: machine %s entered the error state", m.name)
			m.mu.Unlock()
			close(m.done)
			return
		}
	}
}

func (m *machine) DialAgent(ctx context.Context) (net.Conn, error) {
	devs := m.vm.SocketDevices()
	if len(devs) == 0 {
		return nil, errors.New("vz: machine has no vsock device")
	}
	type result struct {
		conn *vz.VirtioSocketConnection
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := devs[0].Connect(m.plan.VsockPort)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("vz: connect vsock port %d: %w", m.plan.VsockPort, r.err)
		}
		return r.conn, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
		return nil, fmt.Errorf("vz: connect vsock port %d: %w", m.plan.VsockPort, ctx.Err())
	}
}

// Stop asks the guest to power off and waits up to the plan's StopTimeout
// (or ctx) before forcing; force skips the request.
func (m *machine) Stop(ctx context.Context, force bool) error {
	select {
	case <-m.done:
		return nil
	default:
	}
	if !force && m.vm.CanRequestStop() {
		if _, err := m.vm.RequestStop(); err != nil {
			slog.Warn("vz request stop failed, forcing", "name", m.name, "err", err)
		} else {
			t := time.NewTimer(m.plan.StopTimeout)
			defer t.Stop()
			select {
			case <-m.done:
				return nil
			case <-t.C:
				slog.Warn("guest did not power off in time, forcing", "name", m.name, "timeout", m.plan.StopTimeout)
			case <-ctx.Done():
				slog.Warn("stop cancelled, forcing", "name", m.name, "err", ctx.Err())
			}
		}
	}
	if m.vm.CanStop() {
		if err := m.vm.Stop(); err != nil {
			return fmt.Errorf("vz: force stop %s: %w", m.name, err)
		}
	}
	// The state change arrives asynchronously after Stop returns; bound the
	// wait so a machine stuck in a transitional state cannot hang vmdock.
	select {
	case <-m.done:
		return nil
	case <-time.After(forceStopWait):
		return fmt.Errorf("vz: machine %s still in state %s %s after a forced stop", m.name, m.vm.State(), forceStopWait)
	}
}

const forceStopWait = 10 * time.Second

func (m *machine) Wait() error {
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exitErr
}

func (m *machine) Info() driver.MachineInfo {
	return driver.MachineInfo{Driver: DriverName, Accel: "vz", PID: os.Getpid()}
}
