//go:build darwin && cgo && arm64

package vz

import "errors"

// vz v3.7.1 binds Virtualization.framework's save and restore (macOS 14)
// in its darwin/arm64 files only.
const canSave = true

func (v *vzVirtualMachine) CheckSavable() error {
	ok, err := v.cfg.ValidateSaveRestoreSupport()
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("validateSaveRestoreSupport said no, without a reason")
	}
	return nil
}

func (v *vzVirtualMachine) SaveState(path string) error { return v.vm.SaveMachineStateToPath(path) }

// RestoreState takes a path: vz makes the file URL itself.
func (v *vzVirtualMachine) RestoreState(path string) error {
	return v.vm.RestoreMachineStateFromURL(path)
}
