//go:build darwin && cgo && amd64

package vz

import "errors"

// Apple's save and restore exist on Intel Macs too (macOS 14), but vz
// v3.7.1 binds them in its darwin/arm64 files only.
const canSave = false

var errNoSaveHere = errors.New("the vz library vmdock uses has no save or restore on Intel Macs")

func (v *vzVirtualMachine) CheckSavable() error       { return errNoSaveHere }
func (v *vzVirtualMachine) SaveState(string) error    { return errNoSaveHere }
func (v *vzVirtualMachine) RestoreState(string) error { return errNoSaveHere }
