package vz

import (
	"context"
	"errors"
	"github.com/vmdock/vmdock/vm/driver"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quick makes a machine's timeouts test-sized.
func quick(m *machine) *machine {
	m.forceStopWait = time.Second
	m.dialRetry = 5 * time.Millisecond
	m.dialWindow = 500 * time.Millisecond
	m.connectTimeout = 50 * time.Millisecond
	return m
}

func testConfig() machineConfig {
	return machineConfig{Name: "test", VsockPort: 2222, StopTimeout: 50 * time.Millisecond, HostVersion: "macOS 15.5 (24F74)"}
}

func bootFake(t *testing.T, f *fakeVZ) *machine {
	t.Helper()
	m, err := bootMachine(f, testConfig())
	if err != nil {
		t.Fatalf("bootMachine: %v", err)
	}
	return quick(m)
}

// waitResult is Wait's answer within d; ok is false when it did not return.
func waitResult(m *machine, d time.Duration) (err error, ok bool) {
	ch := make(chan error, 1)
	go func() { ch <- m.Wait() }()
	select {
	case err := <-ch:
		return err, true
	case <-time.After(d):
		return nil, false
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestMachineStartsAndRuns(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	eventually(t, "running", func() bool { return m.currentState() == stateRunning })
	if _, done := waitResult(m, 50*time.Millisecond); done {
		t.Fatal("Wait returned while the VM runs")
	}
	if info := m.Info(); info.Driver != DriverName || info.Accel != "vz" || info.Version != "macOS 15.5 (24F74)" || info.PID == 0 {
		t.Errorf("Info = %+v", info)
	}
}

// vmdock's process holds none of a vz VM's memory or vCPU time, so the
// machine reports none, and says why.
func TestMachineReportsNoCost(t *testing.T) {
	m := bootFake(t, newFakeVZ())
	_, cpuErr := m.CPUTime()
	_, memErr := m.Memory()
	for _, err := range []error{cpuErr, memErr} {
		if err == nil || err.Error() != "vz: the VM runs in Apple's XPC service" {
			t.Errorf("cost error = %v, want the XPC service reason", err)
		}
	}
}

func TestMachineStartFailureLeavesNothing(t *testing.T) {
	f := newFakeVZ()
	f.startErr = errors.New("Internal Virtualization error")
	m, err := bootMachine(f, testConfig())
	if m != nil || err == nil || !strings.Contains(err.Error(), "Internal Virtualization error") {
		t.Fatalf("bootMachine = %v, %v; want the start error", m, err)
	}
	if s := f.State(); s != stateStopped {
		t.Errorf("VM left %s", s)
	}
}

func TestMachineStopAskedGuestPowersOff(t *testing.T) {
	f := newFakeVZ()
	f.obeysRequest = true
	m := bootFake(t, f)
	m.cfg.StopTimeout = time.Minute // must not be waited for
	start := time.Now()
	if err := m.Stop(t.Context(), false); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Stop took %s though the guest obeyed at once", took)
	}
	if got := f.called(); !slices.Equal(got, []string{"Start", "RequestStop"}) {
		t.Errorf("calls = %v, want a request only", got)
	}
	if err, ok := waitResult(m, time.Second); !ok || err != nil {
		t.Errorf("Wait = %v (returned %v), want nil", err, ok)
	}
}

func TestMachineStopRequestIgnoredForcesAfterTimeout(t *testing.T) {
	f := newFakeVZ() // ignores RequestStop
	m := bootFake(t, f)
	start := time.Now()
	if err := m.Stop(t.Context(), false); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(start); took < m.cfg.StopTimeout {
		t.Errorf("forced after %s, before the %s grace period", took, m.cfg.StopTimeout)
	}
	if got := f.called(); !slices.Equal(got, []string{"Start", "RequestStop", "Stop"}) {
		t.Errorf("calls = %v, want RequestStop then Stop", got)
	}
	if err, ok := waitResult(m, time.Second); !ok || err != nil {
		t.Errorf("Wait = %v (returned %v), want nil: a stop we forced is no failure", err, ok)
	}
}

func TestMachineStopRequestRefusedForcesAtOnce(t *testing.T) {
	for name, answer := range map[string]func() (bool, error){
		"error":   func() (bool, error) { return false, errors.New("no ACPI") },
		"refused": func() (bool, error) { return false, nil },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeVZ()
			f.requestStopFn = answer
			m := bootFake(t, f)
			m.cfg.StopTimeout = time.Minute
			start := time.Now()
			if err := m.Stop(t.Context(), false); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("Stop waited %s after a failed request", took)
			}
			if got := f.called(); !slices.Equal(got, []string{"Start", "RequestStop", "Stop"}) {
				t.Errorf("calls = %v", got)
			}
		})
	}
}

func TestMachineStopCancelledForces(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	m.cfg.StopTimeout = time.Minute
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := m.Stop(ctx, false); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got := f.called(); !slices.Equal(got, []string{"Start", "RequestStop", "Stop"}) {
		t.Errorf("calls = %v", got)
	}
}

func TestMachineForceStopSkipsRequest(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	if err := m.Stop(t.Context(), true); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got := f.called(); !slices.Equal(got, []string{"Start", "Stop"}) {
		t.Errorf("calls = %v, want Stop only", got)
	}
	if err := m.Stop(t.Context(), true); err != nil {
		t.Errorf("second Stop = %v, want nil", err)
	}
	if got := f.called(); len(got) != 2 {
		t.Errorf("a stopped machine was stopped again: %v", got)
	}
}

func TestMachineForceStopStuckReportsState(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	m.forceStopWait = 30 * time.Millisecond
	f.stopErr = errors.New("stop failed")
	err := m.Stop(t.Context(), true)
	if err == nil || !strings.Contains(err.Error(), "stop failed") {
		t.Errorf("Stop = %v, want vz's error", err)
	}
}

func TestMachineErrorMidRunIsBroken(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	eventually(t, "running", func() bool { return m.currentState() == stateRunning })
	f.fail()
	err, ok := waitResult(m, 2*time.Second)
	if !ok {
		t.Fatal("Wait did not return within 2s of the error state")
	}
	if err == nil || !strings.Contains(err.Error(), "error state") || !strings.Contains(err.Error(), "running") {
		t.Errorf("Wait = %v, want the error state named, and what the VM was doing", err)
	}
	if err := m.Stop(t.Context(), false); err != nil {
		t.Errorf("Stop of a failed machine = %v, want nil", err)
	}
}

func TestMachineGuestPowerOffIsStopped(t *testing.T) {
	f := newFakeVZ()
	m := bootFake(t, f)
	f.guestPowerOff()
	err, ok := waitResult(m, 2*time.Second)
	if !ok || err != nil {
		t.Errorf("Wait = %v (returned %v), want nil: the guest's own power-off is a clean stop", err, ok)
	}
}

var errRefused = &net.OpError{Op: "connect", Net: "vsock", Err: syscall.ECONNRESET}

func TestDialAgentRetriesWhileRefused(t *testing.T) {
	f := newFakeVZ()
	host, guest := net.Pipe()
	defer guest.Close()
	f.connect = func(n int) (net.Conn, error) {
		if n < 3 {
			return nil, errRefused
		}
		return host, nil
	}
	m := bootFake(t, f)
	c, err := m.DialAgent(t.Context())
	if err != nil {
		t.Fatalf("DialAgent: %v", err)
	}
	if c != host || f.connectCount() != 3 {
		t.Errorf("DialAgent = %v after %d connects, want the pipe after 3", c, f.connectCount())
	}
}

func TestDialAgentRetriesAHungConnect(t *testing.T) {
	f := newFakeVZ()
	host, guest := net.Pipe()
	defer guest.Close()
	release := make(chan struct{})
	late, lateGuest := net.Pipe()
	defer lateGuest.Close()
	f.connect = func(n int) (net.Conn, error) {
		if n == 1 {
			<-release // Apple: a connect may never complete
			return late, nil
		}
		return host, nil
	}
	m := bootFake(t, f)
	c, err := m.DialAgent(t.Context())
	if err != nil || c != host {
		t.Fatalf("DialAgent = %v, %v; want the second connect's conn", c, err)
	}
	close(release)
	// The connection that arrives after the caller gave up is closed.
	lateGuest.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := lateGuest.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("late connection not closed: %v", err)
	}
}

func TestDialAgentGivesUpAfterItsWindow(t *testing.T) {
	f := newFakeVZ()
	f.connect = func(int) (net.Conn, error) { return nil, errRefused }
	m := bootFake(t, f)
	m.dialWindow = 30 * time.Millisecond
	_, err := m.DialAgent(t.Context())
	if !errors.Is(err, syscall.ECONNRESET) || !strings.Contains(err.Error(), "vsock port 2222") {
		t.Errorf("DialAgent = %v, want the last refusal, wrapped with the port", err)
	}
	if n := f.connectCount(); n < 2 {
		t.Errorf("%d connects, want retries", n)
	}
}

func TestDialAgentDoesNotRetryWithoutVsock(t *testing.T) {
	f := newFakeVZ() // no connect func: no vsock device
	m := bootFake(t, f)
	if _, err := m.DialAgent(t.Context()); !errors.Is(err, errNoVsock) {
		t.Errorf("DialAgent = %v, want errNoVsock", err)
	}
	if n := f.connectCount(); n != 1 {
		t.Errorf("%d connects, want 1", n)
	}
}

func TestDialAgentStopsWhenTheVMStops(t *testing.T) {
	f := newFakeVZ()
	f.connect = func(int) (net.Conn, error) { return nil, errRefused }
	m := bootFake(t, f)
	m.dialWindow = time.Minute
	go func() {
		time.Sleep(20 * time.Millisecond)
		f.guestPowerOff()
	}()
	start := time.Now()
	_, err := m.DialAgent(t.Context())
	if err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("DialAgent = %v after %s, want a quick error once the VM stopped", err, time.Since(start))
	}
}

func TestDialAgentHonoursContext(t *testing.T) {
	f := newFakeVZ()
	f.connect = func(int) (net.Conn, error) { return nil, errRefused }
	m := bootFake(t, f)
	m.dialWindow = time.Minute
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	if _, err := m.DialAgent(ctx); err == nil {
		t.Error("DialAgent succeeded")
	}
}

// The NAT network's guest is routable from the Mac, so its ports take the
// direct path; an isolated VM has no network device and tunnels.
func TestMachineRoutableOnlyBehindNAT(t *testing.T) {
	for _, c := range []struct {
		network string
		want    bool
	}{{driver.NetworkUser, true}, {driver.NetworkIsolated, false}} {
		spec := baseSpec(t)
		spec.Network = c.network
		plan, err := Plan(spec, armHost)
		if err != nil {
			t.Fatal(err)
		}
		m := quick(newMachine(newFakeVZ(), machineConfigFor(spec, plan, "macOS 15.5 (24F74)")))
		if got := m.GuestRoutable(); got != c.want {
			t.Errorf("network %q: GuestRoutable %v, want %v", c.network, got, c.want)
		}
		m.giveUp()
	}
}
