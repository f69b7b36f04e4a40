//go:build !darwin

package vz

import (
	"errors"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/driver"
)

func TestNewOutsideDarwin(t *testing.T) {
	d := New()
	if d.Name() != DriverName {
		t.Errorf("Name = %q", d.Name())
	}
	err := d.Validate(driver.Spec{})
	if !errors.Is(err, driver.ErrUnavailable) || !strings.Contains(err.Error(), "macOS only") {
		t.Errorf("Validate = %v, want macOS-only ErrUnavailable", err)
	}
	if _, err := d.Start(t.Context(), driver.Spec{}); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("Start = %v, want ErrUnavailable", err)
	}
}
