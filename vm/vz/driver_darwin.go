//go:build darwin && cgo

package vz

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"

	vz "github.com/Code-Hex/vz/v3"

	"github.com/vmdock/vmdock/vm/driver"
)

// prepared is what prepare found for a spec, kept in its plan: the
// host's facts and the VM plan made from them.
type prepared struct {
	host HostInfo
	vm   *VMPlan
}

func prepare(spec driver.Spec) (driver.Plan, error) {
	host, err := hostInfo()
	if err != nil {
		return driver.Plan{}, err
	}
	vmPlan, err := Plan(spec, host)
	if err != nil {
		return driver.Plan{}, err
	}
	return driver.NewPlan(spec, prepared{host: host, vm: vmPlan}), nil
}

// fromPlan is the spec and what prepare found for it, from a plan this
// driver's Prepare made.
func fromPlan(p driver.Plan) (driver.Spec, prepared, error) {
	found, ok := p.Found().(prepared)
	if !ok {
		return driver.Spec{}, prepared{}, fmt.Errorf("the plan for instance %q was not made by the vz driver's Prepare", p.Spec().Name)
	}
	return p.Spec(), found, nil
}

func start(_ context.Context, p driver.Plan) (driver.Machine, error) {
	spec, found, err := fromPlan(p)
	if err != nil {
		return nil, err
	}
	plan := found.vm
	version, err := hostVersion()
	if err != nil {
		return nil, err
	}
	vm, err := newVM(spec, plan)
	if err != nil {
		return nil, err
	}
	m, err := bootMachine(vm, machineConfigFor(spec, plan, version))
	if err != nil {
		return nil, err
	}
	slog.Info("vz machine started", "name", spec.Name, "cpus", plan.CPUs, "memory", plan.MemoryBytes)
	return m, nil
}

// resume builds spec's VM exactly as start does (same devices, MAC address
// and machine identifier: vz restores only into those) and loads the
// state at path into it instead of booting.
func resume(_ context.Context, p driver.Plan, path string, saved driver.SavedState) (driver.Machine, error) {
	spec, found, err := fromPlan(p)
	if err != nil {
		return nil, err
	}
	version, err := hostVersion()
	if err != nil {
		return nil, err
	}
	if err := checkSavedState(saved, version); err != nil {
		return nil, err
	}
	plan := found.vm
	if err := saveBlocker(spec, found.host, canSave); err != nil {
		return nil, err
	}
	vm, err := newVM(spec, plan)
	if err != nil {
		return nil, err
	}
	m, err := resumeMachine(vm, machineConfigFor(spec, plan, version), path)
	if err != nil {
		return nil, err
	}
	slog.Info("vz machine resumed", "name", spec.Name)
	return m, nil
}

func saveBlockerFor(spec driver.Spec) error {
	host, err := hostInfo()
	if err != nil {
		return err
	}
	return saveBlocker(spec, host, canSave)
}

// newVM creates, without starting it, the VM plan describes, with the
// identity kept in the instance folder.
func newVM(spec driver.Spec, plan *VMPlan) (*vzVirtualMachine, error) {
	logPlanWarnings(spec.Name, plan)
	id, err := loadIdentity(spec.Dir)
	if err != nil {
		return nil, err
	}
	cfg, err := configure(plan, id, spec.NetFile)
	if err != nil {
		return nil, err
	}
	vm, err := newVZVirtualMachine(spec.Name, cfg)
	return vm, explainMissingEntitlement(err)
}

// hostVersion names the macOS release and build: a saved state loads only
// on the one that wrote it, and a security update changes the build.
func hostVersion() (string, error) {
	ver, err := syscall.Sysctl("kern.osproductversion")
	if err != nil {
		return "", fmt.Errorf("vz: read macOS version: %w", err)
	}
	build, err := syscall.Sysctl("kern.osversion")
	if err != nil {
		return "", fmt.Errorf("vz: read macOS build: %w", err)
	}
	return fmt.Sprintf("macOS %s (%s)", ver, build), nil
}

// hostInfo asks macOS and vz for the facts Plan decides on.
func hostInfo() (HostInfo, error) {
	ver, err := syscall.Sysctl("kern.osproductversion")
	if err != nil {
		return HostInfo{}, fmt.Errorf("vz: read macOS version: %w", err)
	}
	supported, _ := VirtualizationSupported()
	return HostInfo{
		Arch:             hostArch,
		MacOSVersion:     ver,
		Rosetta:          rosettaAvailability(),
		NoVirtualization: !supported,
		// attachPlatform enables it on the platform that carries the
		// machine identifier.
		NestedVirtualization: vz.IsNestedVirtualizationSupported(),
		MinCPUs:              int(vz.VirtualMachineConfigurationMinimumAllowedCPUCount()),
		MaxCPUs:              int(vz.VirtualMachineConfigurationMaximumAllowedCPUCount()),
		MinMemoryMiB:         max(defaultMinMemoryMiB, int(vz.VirtualMachineConfigurationMinimumAllowedMemorySize()>>20)),
		MaxMemoryMiB:         int(vz.VirtualMachineConfigurationMaximumAllowedMemorySize() >> 20),
	}, nil
}
