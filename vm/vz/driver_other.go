//go:build !darwin

package vz

import (
	"context"
	"fmt"

	"github.com/vmdock/vmdock/vm/driver"
)

// New returns the vz driver. Outside macOS it only explains that vz is
// macOS-only, so callers can list it without build tags of their own.
func New() driver.Driver { return unsupported{} }

type unsupported struct{}

func (unsupported) Name() string { return DriverName }

func (unsupported) Validate(driver.Spec) error {
	return fmt.Errorf("vz driver runs on macOS only (use qemu): %w", driver.ErrUnavailable)
}

func (u unsupported) Start(context.Context, driver.Spec) (driver.Machine, error) {
	return nil, u.Validate(driver.Spec{})
}
