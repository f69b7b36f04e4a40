//go:build !darwin || !cgo

package vz

import "errors"

// VirtualizationSupported cannot be asked without vz; the driver and
// doctor's cgo check say why.
func VirtualizationSupported() (bool, error) {
	return false, errors.New("vz: this build has no Virtualization.framework (macOS with cgo only)")
}
