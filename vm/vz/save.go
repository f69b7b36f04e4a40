package vz

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/macos"
)

// stateFormat is the file Virtualization.framework's saveMachineStateToURL
// writes. Apple encrypts it with a key of this Mac, so it loads only here,
// and only on the macOS release that wrote it (SavedState.Hypervisor).
const stateFormat = "vz-machine-state"

// Save needs macOS 14 (saveMachineStateToURL). Directory shares (virtiofs
// mounts and the Rosetta share) made macOS 14 refuse the save ("Unsupported
// directory sharing device in configuration", reported by tart,
// cirruslabs/tart#540); macOS 15.5 saved such VMs (cirruslabs/tart#1082).
// Virtualization.framework's own check runs before every save anyway.
var (
	minMacOSSave       = macos.Version{Major: 14}
	minMacOSSaveShares = macos.Version{Major: 15}
)

// saveBlocker says why a VM of spec cannot be saved on host, or nil.
// savable is false where vz (Code-Hex/vz v3.7.1) has no save at all: it
// binds saveMachineStateToURL on darwin/arm64 only.
func saveBlocker(spec driver.Spec, host HostInfo, savable bool) error {
	ver, err := macos.Parse(host.MacOSVersion)
	if err != nil {
		return fmt.Errorf("vz: %w", err)
	}
	if ver.Less(minMacOSSave) {
		return fmt.Errorf("vz saves a running VM on macOS %s or newer, this Mac runs %s", minMacOSSave, host.MacOSVersion)
	}
	if !savable {
		return fmt.Errorf("vz saves a running VM on Apple silicon only (the vz library vmdock uses has no save on %s)", host.Arch)
	}
	if ver.Less(minMacOSSaveShares) {
		if len(spec.Shares) > 0 {
			return fmt.Errorf("macOS %s cannot save a VM with a shared folder (%s); macOS %s can, and sync mounts (mode: sync) do not have this limit", host.MacOSVersion, spec.Shares[0].HostPath, minMacOSSaveShares)
		}
		if spec.Rosetta {
			return fmt.Errorf("macOS %s cannot save a VM with the Rosetta share; macOS %s can", host.MacOSVersion, minMacOSSaveShares)
		}
	}
	return nil
}

var _ driver.Saver = (*machine)(nil)

// Save pauses the guest, has vz write its state to path and stops the VM.
// Until the VM is stopped every failure resumes the guest, which then
// runs on as if nothing happened.
func (m *machine) Save(ctx context.Context, path string) (driver.SavedState, error) {
	if m.exited() {
		return driver.SavedState{}, errors.New("save: the VM is not running")
	}
	// Asked before the pause, so a VM vz cannot save is not even paused.
	if err := m.vm.CheckSavable(); err != nil {
		return driver.SavedState{}, fmt.Errorf("save: Virtualization.framework cannot save this VM: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return driver.SavedState{}, fmt.Errorf("save: %w", err)
	}
	if err := m.vm.Pause(); err != nil {
		return driver.SavedState{}, m.runOn(fmt.Errorf("save: pause the guest: %w", err))
	}
	saved, err := m.saveTo(path)
	if err != nil {
		return driver.SavedState{}, m.runOn(err)
	}
	if err := m.forceStop(); err != nil {
		os.Remove(path)
		return driver.SavedState{}, m.runOn(fmt.Errorf("save: stop the saved VM: %w", err))
	}
	return saved, nil
}

// saveTo writes the paused VM's state to path, complete or not at all.
func (m *machine) saveTo(path string) (driver.SavedState, error) {
	// vz will not write over a file, and a crash mid-save must not leave
	// a partial file under the final name.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".saving")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return driver.SavedState{}, fmt.Errorf("save: %w", err)
	}
	if err := m.vm.SaveState(tmp); err != nil {
		os.Remove(tmp)
		return driver.SavedState{}, fmt.Errorf("save: Virtualization.framework: %w", err)
	}
	saved, err := describeState(tmp)
	if err == nil {
		err = atomicfile.Commit(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return driver.SavedState{}, fmt.Errorf("save: %w", err)
	}
	saved.Hypervisor, saved.Accel = m.cfg.HostVersion, "vz"
	return saved, nil
}

// runOn resumes a guest paused for a save that failed, and returns err
// (with the resume's failure, if any).
func (m *machine) runOn(err error) error {
	if s := m.vm.State(); s != statePaused && s != statePausing {
		return err
	}
	if rerr := m.vm.Resume(); rerr != nil {
		slog.Warn("save failed and the guest could not be resumed", "name", m.cfg.Name, "err", rerr)
		return fmt.Errorf("%w; resuming the guest failed too: %v", err, rerr)
	}
	return err
}

// describeState is the size and checksum of the state file, read back:
// vz writes it itself, so nothing of ours sees the bytes go by.
func describeState(path string) (driver.SavedState, error) {
	f, err := os.Open(path)
	if err != nil {
		return driver.SavedState{}, fmt.Errorf("read the state file back: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return driver.SavedState{}, fmt.Errorf("read the state file back: %w", err)
	}
	return driver.SavedState{Format: stateFormat, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// checkSavedState refuses a state this host cannot load: another format,
// or another macOS release (Apple rejects a newer one, and an update may
// change the format, which then fails as "invalid argument").
func checkSavedState(saved driver.SavedState, hostVersion string) error {
	if saved.Format != stateFormat {
		return fmt.Errorf("saved state format %q: the vz driver reads %q", saved.Format, stateFormat)
	}
	if saved.Hypervisor != hostVersion {
		return fmt.Errorf("the state was saved on %s, this is %s", saved.Hypervisor, hostVersion)
	}
	return nil
}

// resumeMachine loads the state at path into vm, a stopped VM built from
// the same configuration as the saved one, and runs it. On failure
// nothing runs.
func resumeMachine(vm vzVM, cfg machineConfig, path string) (*machine, error) {
	m := newMachine(vm, cfg)
	if err := vm.RestoreState(path); err != nil {
		m.giveUp()
		return nil, explainMissingEntitlement(fmt.Errorf("vz: restore the saved state of %s: %w", cfg.Name, err))
	}
	// Restored VMs are paused, as they were saved.
	if err := vm.Resume(); err != nil {
		m.giveUp()
		return nil, fmt.Errorf("vz: run the restored machine %s: %w", cfg.Name, err)
	}
	return m, nil
}
