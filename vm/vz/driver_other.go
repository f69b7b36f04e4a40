//go:build !darwin

package vz

import (
	"context"
	"fmt"

	"github.com/vmdock/vmdock/vm/driver"
)

func validate(driver.Spec) error {
	return fmt.Errorf("vz driver runs on macOS only (use qemu): %w", driver.ErrUnavailable)
}

func start(context.Context, driver.Spec) (driver.Machine, error) {
	return nil, validate(driver.Spec{})
}

func resume(context.Context, driver.Spec, string, driver.SavedState) (driver.Machine, error) {
	return nil, validate(driver.Spec{})
}

func saveBlockerFor(driver.Spec) error { return validate(driver.Spec{}) }
