//go:build darwin && !cgo

package vz

import (
	"context"
	"fmt"

	"github.com/vmdock/vmdock/vm/driver"
)

// This build has no cgo, and vz needs cgo to reach
// Virtualization.framework, so the driver only reports that.
func validate(driver.Spec) error {
	return fmt.Errorf("vz driver needs cgo: this vmdock was built with CGO_ENABLED=0 (rebuild with cgo, or use qemu): %w", driver.ErrUnavailable)
}

func start(context.Context, driver.Spec) (driver.Machine, error) {
	return nil, validate(driver.Spec{})
}

func resume(context.Context, driver.Spec, string, driver.SavedState) (driver.Machine, error) {
	return nil, validate(driver.Spec{})
}

func saveBlockerFor(driver.Spec) error { return validate(driver.Spec{}) }
