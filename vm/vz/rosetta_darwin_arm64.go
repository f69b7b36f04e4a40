//go:build darwin && cgo && arm64

package vz

import (
	"errors"
	"fmt"
	"log/slog"

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

func currentRosettaHost() rosettaHost {
	return rosettaHost{availability: rosettaAvailability, install: rosettaSoftwareUpdate.install}
}

// rosettaShare is the Rosetta virtiofs device, with the translation cache
// when the plan asks for it (Plan only does from macOS 14 on, where
// SetOptions does something) and this binary's SDK offers it.
func rosettaShare(r RosettaPlan) (vz.DirectorySharingDeviceConfiguration, error) {
	share, err := vz.NewLinuxRosettaDirectoryShare()
	if err != nil {
		return nil, fmt.Errorf("vz: rosetta share: %w", err)
	}
	warning, err := rosettaCaching(r, func(socket string) error {
		opts, err := vz.NewLinuxRosettaAbstractSocketCachingOptions(socket)
		if errors.Is(err, vz.ErrBuildTargetOSVersion) {
			return fmt.Errorf("%w (%w)", errCachingNotBuiltIn, err)
		}
		if err != nil {
			return err
		}
		share.SetOptions(opts)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if warning != "" {
		slog.Warn(warning)
	}
	dev, err := vz.NewVirtioFileSystemDeviceConfiguration(r.Tag)
	if err != nil {
		return nil, fmt.Errorf("vz: virtiofs tag %q: %w", r.Tag, err)
	}
	dev.SetDirectoryShare(share)
	return dev, nil
}
