//go:build darwin && !cgo

package vz

import (
	"context"
	"fmt"

	"github.com/vmdock/vmdock/vm/driver"
)

// This build has no cgo, and vz needs cgo to reach
// Virtualization.framework, so the driver only reports that.
func unavailable() error {
	return fmt.Errorf("vz driver needs cgo: this vmdock was built with CGO_ENABLED=0 (rebuild with cgo, or use qemu): %w", driver.ErrUnavailable)
}

func prepare(driver.Spec) (driver.Plan, error) { return driver.Plan{}, unavailable() }

func start(context.Context, driver.Plan) (driver.Machine, error) { return nil, unavailable() }

func resume(context.Context, driver.Plan, string, driver.SavedState) (driver.Machine, error) {
	return nil, unavailable()
}

func saveBlockerFor(driver.Spec) error { return unavailable() }
