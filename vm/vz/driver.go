package vz

import (
	"context"

	"github.com/vmdock/vmdock/vm/driver"
)

// Driver runs VMs with Apple's Virtualization.framework. The type and its
// methods are the same on every OS, so callers list it without build tags;
// what a build can do lives in the per-OS prepare and start (macOS with
// cgo: the real driver; macOS without cgo and other systems: an error
// saying why vz is unavailable), and likewise for save and resume.
type Driver struct{}

// New returns the vz driver.
func New() driver.Driver { return Driver{} }

var (
	_ driver.Driver  = Driver{}
	_ driver.Resumer = Driver{}
)

func (Driver) Name() string { return DriverName }

// Prepare checks spec against this host without starting anything and
// returns the plan Start and Resume boot.
func (Driver) Prepare(spec driver.Spec) (driver.Plan, error) { return prepare(spec) }

// Start boots plan's spec and returns once the VM runs.
func (Driver) Start(ctx context.Context, plan driver.Plan) (driver.Machine, error) {
	return start(ctx, plan)
}

// SaveBlocker says why a VM of spec cannot be saved on this host, or nil.
func (Driver) SaveBlocker(spec driver.Spec) error { return saveBlockerFor(spec) }

// Resume starts plan's VM from the state Save wrote at path. The
// accelerator is always vz's own, so accel is not needed.
func (Driver) Resume(ctx context.Context, plan driver.Plan, path string, saved driver.SavedState, _ string) (driver.Machine, error) {
	return resume(ctx, plan, path, saved)
}
