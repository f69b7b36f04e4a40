//go:build darwin && cgo

package vz

import (
	"bytes"
	"errors"
	"fmt"

	vz "github.com/Code-Hex/vz/v3"
)

// vmIdentity is the instance's stored identity (identity.go) as vz
// objects.
type vmIdentity struct {
	MAC       *vz.MACAddress
	MachineID *vz.GenericMachineIdentifier
}

// loadIdentity reads the identity kept in the instance folder dir, making
// it on the first start.
func loadIdentity(dir string) (vmIdentity, error) {
	hw, err := instanceMAC(dir)
	if err != nil {
		return vmIdentity{}, err
	}
	mac, err := vz.NewMACAddress(hw)
	if err != nil {
		return vmIdentity{}, fmt.Errorf("vz: MAC address %s: %w", hw, err)
	}
	data, err := instanceMachineID(dir, newMachineIDData)
	if err != nil {
		return vmIdentity{}, err
	}
	id, err := vz.NewGenericMachineIdentifierWithData(data)
	if err != nil {
		return vmIdentity{}, fmt.Errorf("vz: machine identifier: %w", err)
	}
	// initWithDataRepresentation: answers nil for data it does not
	// recognise, which vz passes on as an identifier without data.
	if len(id.DataRepresentation()) == 0 {
		return vmIdentity{}, damagedMachineID(dir, errors.New("Virtualization.framework does not recognise its content"))
	}
	return vmIdentity{MAC: mac, MachineID: id}, nil
}

func newMachineIDData() ([]byte, error) {
	id, err := vz.NewGenericMachineIdentifier()
	if err != nil {
		return nil, err
	}
	// The slice is NSData's memory, not Go's.
	return bytes.Clone(id.DataRepresentation()), nil
}

// attachPlatform sets the generic platform with the instance's machine
// identifier, and nested virtualization (a setting of the same platform
// object) when the plan asks for it.
func attachPlatform(cfg *vz.VirtualMachineConfiguration, p *VMPlan, id vmIdentity) error {
	platform, err := vz.NewGenericPlatformConfiguration(vz.WithGenericMachineIdentifier(id.MachineID))
	if err != nil {
		return fmt.Errorf("vz: platform configuration: %w", err)
	}
	if p.NestedVirtualization {
		if err := platform.SetNestedVirtualizationEnabled(true); err != nil {
			return fmt.Errorf("vz: nested virtualization: %w", err)
		}
	}
	cfg.SetPlatformVirtualMachineConfiguration(platform)
	return nil
}
