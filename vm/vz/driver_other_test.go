//go:build !darwin

package vz

import (
	"context"
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
	_, err := d.Prepare(driver.Spec{})
	if !errors.Is(err, driver.ErrUnavailable) || !strings.Contains(err.Error(), "macOS only") {
		t.Errorf("Prepare = %v, want macOS-only ErrUnavailable", err)
	}
	if _, err := d.Start(t.Context(), driver.Plan{}); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("Start = %v, want ErrUnavailable", err)
	}
	r := d.(driver.Resumer)
	if err := r.SaveBlocker(driver.Spec{}); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("SaveBlocker = %v, want ErrUnavailable", err)
	}
	if _, err := r.Resume(t.Context(), driver.Plan{}, "vm.state", driver.SavedState{Format: stateFormat}, "vz"); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("Resume = %v, want ErrUnavailable", err)
	}
}

// Without vz there is no Rosetta to offer: a --vz-rosetta start neither
// asks nor fails here, and the driver says why vz cannot run.
func TestOfferRosettaInstallOutsideDarwin(t *testing.T) {
	asked := false
	err := OfferRosettaInstall(context.Background(), true, func(string) (bool, error) { asked = true; return true, nil })
	if err != nil || asked {
		t.Errorf("OfferRosettaInstall = %v (asked: %v), want nil without a question", err, asked)
	}
}
