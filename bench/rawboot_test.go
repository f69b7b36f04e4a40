package bench

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

// bootingMachine is a VM whose agent comes up after bootFor: dials fail
// until then, and afterwards a minimal guest speaks the real handshake and
// answers info and power-off, which ends the machine.
type bootingMachine struct {
	started time.Time
	bootFor time.Duration
	dials   int
	mu      sync.Mutex
	off     chan struct{}
	offOnce sync.Once
	stopped bool
	gotSpec driver.Spec
}

func (m *bootingMachine) DialAgent(ctx context.Context) (net.Conn, error) {
	m.mu.Lock()
	m.dials++
	m.mu.Unlock()
	if time.Since(m.started) < m.bootFor {
		return nil, errors.New("agent socket not there yet")
	}
	host, guest := net.Pipe()
	go m.serveGuest(guest)
	return host, nil
}

func (m *bootingMachine) serveGuest(conn net.Conn) {
	if err := agent.GuestHello(conn); err != nil {
		return
	}
	sess, err := yamux.Server(conn, agent.YamuxConfig(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return
	}
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		var req agent.Request
		if agent.ReadJSONLine(st, &req) != nil {
			st.Close()
			continue
		}
		switch req.Op {
		case agent.OpInfo:
			agent.WriteJSONLine(st, agent.Response{OK: true, Info: &agent.Info{Version: "test", Uptime: 12.5}})
		case agent.OpPowerOff:
			agent.Reply(st, nil)
			m.offOnce.Do(func() { close(m.off) })
		}
		st.Close()
	}
}

func (m *bootingMachine) Stop(context.Context, bool) error {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	m.offOnce.Do(func() { close(m.off) })
	return nil
}
func (m *bootingMachine) Wait() error              { <-m.off; return nil }
func (m *bootingMachine) Info() driver.MachineInfo { return driver.MachineInfo{} }

type fakeDriver struct{ m *bootingMachine }

func (d fakeDriver) Name() string { return "fake" }
func (d fakeDriver) Prepare(s driver.Spec) (driver.Plan, error) {
	return driver.NewPlan(s, nil), nil
}
func (d fakeDriver) Start(_ context.Context, p driver.Plan) (driver.Machine, error) {
	d.m.started, d.m.gotSpec = time.Now(), p.Spec()
	return d.m, nil
}

func TestRawBoot(t *testing.T) {
	m := &bootingMachine{bootFor: 300 * time.Millisecond, off: make(chan struct{})}
	spec := driver.Spec{Name: "x", Shares: []mounts.Share{{Tag: "home", HostPath: "/home"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	took, uptime, err := RawBoot(ctx, fakeDriver{m}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if took < m.bootFor || took > 5*time.Second {
		t.Errorf("took %v for a guest that answers after %v", took, m.bootFor)
	}
	if m.dials < 2 {
		t.Errorf("%d dials: the baseline must retry while the guest boots", m.dials)
	}
	if len(m.gotSpec.Shares) != 1 {
		t.Errorf("booted shares %v: the baseline boots the same VM", m.gotSpec.Shares)
	}
	if uptime != 12.5 {
		t.Errorf("guest uptime %v, want the agent's 12.5", uptime)
	}
	if m.stopped {
		t.Errorf("the guest powered off by itself; no force stop was needed")
	}
}

func TestRawBootVMExits(t *testing.T) {
	m := &bootingMachine{bootFor: time.Hour, off: make(chan struct{})}
	close(m.off) // the VM dies at once
	m.offOnce.Do(func() {})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := RawBoot(ctx, fakeDriver{m}, driver.Spec{}); err == nil {
		t.Fatal("want an error when the VM exits before its agent answers")
	}
}
