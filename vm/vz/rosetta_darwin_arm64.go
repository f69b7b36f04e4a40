//go:build darwin && cgo && arm64

package vz

import (
	"fmt"

	vz "github.com/Code-Hex/vz/v3"
)

const hostArch = "arm64"

func rosettaAvailability() RosettaAvailability {
	switch vz.LinuxRosettaDirectoryShareAvailability() {
	case vz.LinuxRosettaAvailabilityInstalled:
		return RosettaInstalled
	case vz.LinuxRosettaAvailabilityNotInstalled:
		return RosettaNotInstalled
	}
	return RosettaUnsupported
}

func rosettaShare(tag string) (vz.DirectorySharingDeviceConfiguration, error) {
	share, err := vz.NewLinuxRosettaDirectoryShare()
	if err != nil {
		return nil, fmt.Errorf("vz: rosetta share: %w", err)
	}
	dev, err := vz.NewVirtioFileSystemDeviceConfiguration(tag)
	if err != nil {
		return nil, fmt.Errorf("vz: virtiofs tag %q: %w", tag, err)
	}
	dev.SetDirectoryShare(share)
	return dev, nil
}
