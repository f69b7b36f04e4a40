//go:build darwin && cgo

package vz

import (
	"fmt"
	"net"

	vz "github.com/Code-Hex/vz/v3"
)

// vzVirtualMachine is the vzVM of a real Virtualization.framework VM. It
// only translates; what the calls mean for the machine is in machine.go.
type vzVirtualMachine struct {
	vm     *vz.VirtualMachine
	cfg    *vz.VirtualMachineConfiguration // for CheckSavable
	states chan vmState
}

var _ vzVM = (*vzVirtualMachine)(nil)

func newVZVirtualMachine(name string, cfg *vz.VirtualMachineConfiguration) (*vzVirtualMachine, error) {
	vm, err := vz.NewVirtualMachine(cfg)
	if err != nil {
		return nil, fmt.Errorf("vz: create machine %s: %w", name, err)
	}
	v := &vzVirtualMachine{vm: vm, cfg: cfg, states: make(chan vmState, 16)}
	go func() {
		for s := range vm.StateChangedNotify() {
			v.states <- vmStateOf(s)
		}
	}()
	return v, nil
}

// vmStateOf names vz's state in machine.go's terms.
func vmStateOf(s vz.VirtualMachineState) vmState {
	switch s {
	case vz.VirtualMachineStateStopped:
		return stateStopped
	case vz.VirtualMachineStateRunning:
		return stateRunning
	case vz.VirtualMachineStatePaused:
		return statePaused
	case vz.VirtualMachineStateError:
		return stateError
	case vz.VirtualMachineStateStarting:
		return stateStarting
	case vz.VirtualMachineStatePausing:
		return statePausing
	case vz.VirtualMachineStateResuming:
		return stateResuming
	case vz.VirtualMachineStateStopping:
		return stateStopping
	case vz.VirtualMachineStateSaving:
		return stateSaving
	case vz.VirtualMachineStateRestoring:
		return stateRestoring
	}
	return vmState(-1) // a state newer than this vz: neither stopped nor failed
}

func (v *vzVirtualMachine) Start() error                 { return v.vm.Start() }
func (v *vzVirtualMachine) Pause() error                 { return v.vm.Pause() }
func (v *vzVirtualMachine) Resume() error                { return v.vm.Resume() }
func (v *vzVirtualMachine) CanRequestStop() bool         { return v.vm.CanRequestStop() }
func (v *vzVirtualMachine) RequestStop() (bool, error)   { return v.vm.RequestStop() }
func (v *vzVirtualMachine) CanStop() bool                { return v.vm.CanStop() }
func (v *vzVirtualMachine) Stop() error                  { return v.vm.Stop() }
func (v *vzVirtualMachine) State() vmState               { return vmStateOf(v.vm.State()) }
func (v *vzVirtualMachine) StateChanged() <-chan vmState { return v.states }

// ConnectVsock uses the first socket device: configure attaches one.
func (v *vzVirtualMachine) ConnectVsock(port uint32) (net.Conn, error) {
	devs := v.vm.SocketDevices()
	if len(devs) == 0 {
		return nil, errNoVsock
	}
	c, err := devs[0].Connect(port)
	if err != nil {
		return nil, err // not a typed nil *VirtioSocketConnection in the interface
	}
	return c, nil
}
