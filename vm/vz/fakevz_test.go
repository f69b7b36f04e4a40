package vz

import (
	"errors"
	"net"
	"os"
	"slices"
	"sync"
)

// fakeVZ scripts what *vz.VirtualMachine does: each call moves through
// the states vz reports (starting → running, pausing → paused, ...) and
// sends every change once on the state channel, as vz does.
type fakeVZ struct {
	mu     sync.Mutex
	state  vmState
	states chan vmState
	calls  []string

	// Scripted behaviour; the zero value is a VM that works and a guest
	// that ignores RequestStop.
	startErr      error
	pauseErr      error
	resumeErr     error
	stopErr       error
	notSavable    error
	saveErr       error
	restoreErr    error
	obeysRequest  bool                                // the guest powers off when asked
	requestStopFn func() (bool, error)                // overrides RequestStop's answer
	connect       func(attempt int) (net.Conn, error) // nil: no vsock device
	connects      int
	savedBytes    []byte // what SaveState writes
	restored      string // path RestoreState loaded
}

func newFakeVZ() *fakeVZ {
	return &fakeVZ{states: make(chan vmState, 64), savedBytes: []byte("guest memory")}
}

func (f *fakeVZ) set(s ...vmState) {
	for _, st := range s {
		f.state = st
		f.states <- st
	}
}

func (f *fakeVZ) record(call string) {
	f.calls = append(f.calls, call)
}

func (f *fakeVZ) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeVZ) Start() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Start")
	f.set(stateStarting)
	if f.startErr != nil {
		f.set(stateStopped)
		return f.startErr
	}
	f.set(stateRunning)
	return nil
}

func (f *fakeVZ) Pause() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Pause")
	if f.pauseErr != nil {
		return f.pauseErr
	}
	f.set(statePausing, statePaused)
	return nil
}

func (f *fakeVZ) Resume() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Resume")
	if f.resumeErr != nil {
		return f.resumeErr
	}
	if f.state != statePaused {
		return errors.New("fake vz: resume of a VM that is not paused")
	}
	f.set(stateResuming, stateRunning)
	return nil
}

func (f *fakeVZ) CanRequestStop() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state == stateRunning
}

func (f *fakeVZ) RequestStop() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("RequestStop")
	if f.requestStopFn != nil {
		return f.requestStopFn()
	}
	if f.obeysRequest {
		f.set(stateStopping, stateStopped)
	}
	return true, nil
}

func (f *fakeVZ) CanStop() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state == stateRunning || f.state == statePaused || f.state == stateStarting
}

func (f *fakeVZ) Stop() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("Stop")
	if f.stopErr != nil {
		return f.stopErr
	}
	f.set(stateStopping, stateStopped)
	return nil
}

func (f *fakeVZ) State() vmState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fakeVZ) StateChanged() <-chan vmState { return f.states }

func (f *fakeVZ) ConnectVsock(port uint32) (net.Conn, error) {
	f.mu.Lock()
	f.connects++
	n, connect := f.connects, f.connect
	f.mu.Unlock()
	if connect == nil {
		return nil, errNoVsock
	}
	return connect(n)
}

func (f *fakeVZ) connectCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connects
}

func (f *fakeVZ) CheckSavable() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("CheckSavable")
	return f.notSavable
}

func (f *fakeVZ) SaveState(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("SaveState")
	if f.state != statePaused {
		return errors.New("fake vz: save of a VM that is not paused")
	}
	if f.saveErr != nil {
		return f.saveErr
	}
	if _, err := os.Stat(path); err == nil {
		return errors.New("fake vz: the state file exists") // vz does not overwrite
	}
	f.set(stateSaving)
	err := os.WriteFile(path, f.savedBytes, 0o600)
	f.set(statePaused)
	return err
}

func (f *fakeVZ) RestoreState(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("RestoreState")
	if f.state != stateStopped {
		return errors.New("fake vz: restore into a VM that is not stopped")
	}
	if f.restoreErr != nil {
		return f.restoreErr // Apple: "the virtual machine state is unchanged"
	}
	f.set(stateRestoring, statePaused)
	f.restored = path
	return nil
}

// guestPowerOff is the guest shutting itself down (poweroff in the VM).
func (f *fakeVZ) guestPowerOff() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set(stateStopping, stateStopped)
}

// fail is Virtualization.framework failing the VM mid-run.
func (f *fakeVZ) fail() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set(stateError)
}
