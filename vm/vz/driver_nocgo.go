//go:build darwin && !cgo

package vz

import (
	"context"
	"fmt"

	"github.com/vmdock/vmdock/vm/driver"
)

// New returns the vz driver. This build has no cgo, and vz needs cgo to
// reach Virtualization.framework, so the driver only reports that.
func New() driver.Driver { return noCgo{} }

type noCgo struct{}

func (noCgo) Name() string { return DriverName }

func (noCgo) Validate(driver.Spec) error {
	return fmt.Errorf("vz driver needs cgo: this vmdock was built with CGO_ENABLED=0 (rebuild with cgo, or use qemu): %w", driver.ErrUnavailable)
}

func (n noCgo) Start(context.Context, driver.Spec) (driver.Machine, error) {
	return nil, n.Validate(driver.Spec{})
}
