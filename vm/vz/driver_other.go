//go:build !darwin

package vz

import (
	"context"
	"fmt"

	"github.com/vmdock/vmdock/vm/driver"
)

func unavailable() error {
	return fmt.Errorf("vz driver runs on macOS only (use qemu): %w", driver.ErrUnavailable)
}

func prepare(driver.Spec) (driver.Plan, error) { return driver.Plan{}, unavailable() }

func start(context.Context, driver.Plan) (driver.Machine, error) { return nil, unavailable() }

func resume(context.Context, driver.Plan, string, driver.SavedState) (driver.Machine, error) {
	return nil, unavailable()
}

func saveBlockerFor(driver.Spec) error { return unavailable() }
