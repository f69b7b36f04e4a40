//go:build !darwin || !cgo

package vz

// Without vz there is nothing to install Rosetta for; Prepare and Start
// say why vz is unavailable.
func currentRosettaHost() rosettaHost { return rosettaHost{} }
