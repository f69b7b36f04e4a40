package vz

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmdock/vmdock/vm/driver"
)

var _ driver.Pauser = (*machine)(nil)

// Pause freezes the guest (VZVirtualMachine pause); its vsock connections
// stay open and wait for Unpause. vz cannot cancel the call, so ctx is
// not consulted once it has started.
func (m *machine) Pause(context.Context) error {
	if m.exited() {
		return errors.New("vz: pause: the VM is not running")
	}
	if s := m.vm.State(); s == statePaused || s == statePausing {
		return nil
	}
	if err := m.vm.Pause(); err != nil {
		return fmt.Errorf("vz: pause %s: %w", m.cfg.Name, err)
	}
	return nil
}

// Paused reports whether the VM is paused or being paused.
func (m *machine) Paused(context.Context) (bool, error) {
	if m.exited() {
		return false, errors.New("vz: paused: the VM is not running")
	}
	s := m.vm.State()
	return s == statePaused || s == statePausing, nil
}

// Unpause lets a paused guest run again (VZVirtualMachine resume).
func (m *machine) Unpause(context.Context) error {
	if m.exited() {
		return errors.New("vz: unpause: the VM is not running")
	}
	if s := m.vm.State(); s != statePaused {
		return fmt.Errorf("vz: unpause %s: the VM is %s, not paused", m.cfg.Name, s)
	}
	if err := m.vm.Resume(); err != nil {
		return fmt.Errorf("vz: unpause %s: %w", m.cfg.Name, err)
	}
	return nil
}
