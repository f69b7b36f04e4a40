package hostagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/store"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// bootingMachine is an agentMachine that says how it was accelerated
// and records how it was stopped.
type bootingMachine struct {
	*agentMachine
	info  driver.MachineInfo
	mu    sync.Mutex
	stops []bool // force, per Stop
}

func (m *bootingMachine) Info() driver.MachineInfo { return m.info }

func (m *bootingMachine) Stop(_ context.Context, force bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stops = append(m.stops, force)
	return nil
}

// fakeDriver prepares any spec and starts m, unless told to refuse.
type fakeDriver struct {
	m          driver.Machine
	prepareErr error
	startErr   error
	started    driver.Spec
}

func (d *fakeDriver) Name() string { return "fake" }

func (d *fakeDriver) Prepare(spec driver.Spec) (driver.Plan, error) {
	if d.prepareErr != nil {
		return driver.Plan{}, d.prepareErr
	}
	return driver.NewPlan(spec, "checked"), nil
}

func (d *fakeDriver) Start(_ context.Context, p driver.Plan) (driver.Machine, error) {
	if d.startErr != nil {
		return nil, d.startErr
	}
	if p.Found() != "checked" {
		return nil, errors.New("started from a plan Prepare did not make")
	}
	d.started = p.Spec()
	return d.m, nil
}

// bootingHostAgent is a host agent before its vm step, whose driver is d.
func bootingHostAgent(t *testing.T, cfg config.Config, d driver.Driver) *hostAgent {
	t.Helper()
	t.Setenv("PATH", shortdir.New(t)) // no journalctl for the guest log follower
	inst := &store.Instance{Name: "dev", Dir: shortdir.New(t)}
	if err := os.WriteFile(inst.SerialLogPath(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := Options{AgentTimeout: 10 * time.Second}
	opts.setDefaults()
	ha := newHostAgent(inst, cfg, opts)
	ha.boot.spec = driver.Spec{Name: inst.Name, Dir: inst.Dir, CPUs: 2, MemoryMiB: 1024, SerialLog: inst.SerialLogPath()}
	ha.boot.driver = d
	return ha
}

// The boot from the spec to the tunnels, on a fake driver and a guest
// agent serving in this process: the checked spec is recorded and
// booted, the agent's hello kept, the guest set up, the port rules
// applied, and the undo steps stop what runs.
func TestBootStepsFromSpecToTunnels(t *testing.T) {
	w := newGuestWorld(t)
	mapped, ignored := w.echoPort(), w.echoPort()
	w.listen(mapped, ignored)
	hostPort := freePort(t)
	m := &bootingMachine{agentMachine: newAgentMachine(), info: driver.MachineInfo{Accel: "tcg", AccelReason: "/dev/kvm is missing"}}
	guestOS := &recordingOS{}
	m.start(w.agent(guestOS))
	d := &fakeDriver{m: m}
	cfg := config.Config{Runtime: config.RuntimeDocker, VMType: driver.TypeQEMU,
		Network:     config.NetworkConfig{PortBind: "127.0.0.2"},
		PortForward: config.PortForward{Rules: []config.PortRule{{Guest: strconv.Itoa(mapped), Host: strconv.Itoa(hostPort), Proto: "tcp"}}, Ignore: []string{strconv.Itoa(ignored)}},
	}
	ha := bootingHostAgent(t, cfg, d)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []step{{"spec", ha.stepSpec, nil}, {"vm", ha.stepVM, nil}, {"agent", ha.connectAgent, nil}, {"setup", ha.stepSetup, nil}, {"mounts", ha.stepMounts, nil}, {"tunnels", ha.stepTunnels, nil}} {
		if err := s.run(ctx); err != nil {
			t.Fatalf("step %s: %v", s.name, err)
		}
	}
	var saved driver.Spec
	if b, err := os.ReadFile(ha.inst.SpecPath()); err != nil || json.Unmarshal(b, &saved) != nil || saved.Name != "dev" || saved.CPUs != 2 {
		t.Errorf("spec.json = %+v (%v), want the booted spec", saved, err)
	}
	if d.started.Name != "dev" || ha.currentMachine() != m {
		t.Errorf("started %+v, machine %v; want the spec's VM running", d.started, ha.currentMachine())
	}
	if ha.boot.hello.Version == "" || ha.session.client == nil || ha.session.count != 1 {
		t.Errorf("after the agent step: hello %+v, session %v (%d)", ha.boot.hello, ha.session.client, ha.session.count)
	}
	if ran := guestOS.ran(); !strings.Contains(ran, "hostname vmdock-dev") {
		t.Errorf("the setup did not name the guest vmdock-dev:\n%s", ran)
	}
	past, _, stop := ha.events.Follow()
	stop()
	if !hasEvent(past, "vm", "accel: tcg (/dev/kvm is missing)") {
		t.Errorf("no note of the accelerator's fallback in %+v", past)
	}
	hostAddr := fmt.Sprintf("127.0.0.2:%d", hostPort)
	waitFor(t, 5*time.Second, "the mapped port forwarded", func() bool { return echoes("tcp", hostAddr) == nil })
	for _, p := range ha.status().Ports {
		if p.GuestPort == ignored {
			t.Errorf("the ignored port %d is forwarded: %+v", ignored, p)
		}
		if p.GuestPort == mapped && p.HostAddr != hostAddr {
			t.Errorf("port %d forwarded on %s, want the rule's %s", mapped, p.HostAddr, hostAddr)
		}
	}

	for _, undo := range []func(context.Context) error{ha.undoTunnels, ha.undoAgent, ha.undoVM} {
		if err := undo(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if echoes("tcp", hostAddr) == nil {
		t.Error("the forwarded port still answers after the tunnels' undo")
	}
	if ha.session.client != nil || ha.run.tunnels != nil {
		t.Error("the undo steps left the session or the tunnels")
	}
	if len(m.stops) != 1 || !m.stops[0] {
		t.Errorf("stops %v, want one forced stop", m.stops)
	}
}

func hasEvent(evs []control.Event, step, detail string) bool {
	for _, ev := range evs {
		if ev.Step == step && strings.Contains(ev.Detail, detail) {
			return true
		}
	}
	return false
}

// A driver's refusal fails its step with the driver's reason, and
// nothing runs; a VM that ends before its agent answers fails the agent
// step at once, not at the timeout.
func TestBootStepsFailFast(t *testing.T) {
	cfg := config.Config{Runtime: config.RuntimeDocker, VMType: driver.TypeQEMU}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ha := bootingHostAgent(t, cfg, &fakeDriver{prepareErr: errors.New("qemu-system-x86_64 not found")})
	if err := ha.stepSpec(ctx); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("spec step with a refusing driver: %v", err)
	}
	if _, err := os.Stat(ha.inst.SpecPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused spec was recorded: %v", err)
	}

	ha = bootingHostAgent(t, cfg, &fakeDriver{startErr: errors.New("could not access KVM kernel module")})
	if err := ha.stepSpec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ha.stepVM(ctx); err == nil || !strings.Contains(err.Error(), "KVM") || ha.currentMachine() != nil {
		t.Errorf("vm step with a failing start: %v (machine %v)", err, ha.currentMachine())
	}
	if err := ha.undoVM(ctx); err != nil {
		t.Errorf("undo of a VM that never ran: %v", err)
	}

	gone := &bootingMachine{agentMachine: newAgentMachine()} // no agent ever answers
	ha = bootingHostAgent(t, cfg, &fakeDriver{m: gone})
	if err := ha.stepSpec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ha.stepVM(ctx); err != nil {
		t.Fatal(err)
	}
	close(gone.done) // the VM exits
	start := time.Now()
	err := ha.connectAgent(ctx)
	if err == nil || !strings.Contains(err.Error(), "the VM exited before its agent answered") {
		t.Errorf("agent step of an exited VM: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the agent step took %s to see the VM gone", took)
	}

	silent := &bootingMachine{agentMachine: newAgentMachine()}
	ha = bootingHostAgent(t, cfg, &fakeDriver{m: silent})
	ha.opts.AgentTimeout = 300 * time.Millisecond
	if err := ha.stepSpec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ha.stepVM(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ha.connectAgent(ctx); err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Errorf("agent step of a guest that never answers: %v", err)
	}
}
