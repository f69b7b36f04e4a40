package qemu

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmdock/vmdock/vm/driver"
)

var _ driver.Pauser = (*Machine)(nil)

// Pause stops the guest's vCPUs (QMP stop). QEMU's own loop keeps its
// sockets: the agent channel and forwarded connections wait, unbroken,
// for Unpause.
func (m *Machine) Pause(ctx context.Context) error {
	if m.exited() {
		return errors.New("pause: the VM is not running")
	}
	if err := m.qmp.execute(ctx, "stop", nil, nil); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return nil
}

// Paused reports whether QEMU's run state is paused (query-status).
func (m *Machine) Paused(ctx context.Context) (bool, error) {
	st, err := m.QueryStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("paused: %w", err)
	}
	return st == "paused", nil
}

// Unpause lets a paused guest run again (QMP cont).
func (m *Machine) Unpause(ctx context.Context) error {
	if m.exited() {
		return errors.New("unpause: the VM is not running")
	}
	if err := m.qmp.execute(ctx, "cont", nil, nil); err != nil {
		return fmt.Errorf("unpause: %w", err)
	}
	return nil
}
