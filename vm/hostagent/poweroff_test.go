package hostagent

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
)

// stubMachine is a VM that obeys the ACPI power button or ignores it; a
// graceful Stop that runs out of time ends it, as the drivers do.
type stubMachine struct {
	obeysACPI  bool
	deadShares []string
	once       sync.Once
	done       chan struct{}
	// forced says the VM was ended rather than powered off.
	forced bool
}

func newStubMachine(obeysACPI bool) *stubMachine {
	return &stubMachine{obeysACPI: obeysACPI, done: make(chan struct{})}
}

func (m *stubMachine) exit() { m.once.Do(func() { close(m.done) }) }

func (m *stubMachine) DialAgent(context.Context) (net.Conn, error) { return nil, net.ErrClosed }
func (m *stubMachine) Info() driver.MachineInfo {
	return driver.MachineInfo{DeadShares: m.deadShares}
}
func (m *stubMachine) Wait() error { <-m.done; return nil }
func (m *stubMachine) Stop(ctx context.Context, force bool) error {
	if !force && !m.obeysACPI {
		<-ctx.Done()
	}
	m.forced = m.forced || force
	m.exit()
	return nil
}

// guestAgent connects a real agent client to a guest end that says hello
// and then either answers the power-off (and powers the machine off) or
// never reads again, like a killed agent behind an open channel.
func guestAgent(t *testing.T, m *stubMachine, answers bool) *agent.Client {
	t.Helper()
	return guestAgentSeeing(t, m, answers, nil)
}

// guestAgentSeeing is guestAgent that also sends each op it reads to ops.
func guestAgentSeeing(t *testing.T, m *stubMachine, answers bool, ops chan<- string) *agent.Client {
	t.Helper()
	host, guest := net.Pipe()
	t.Cleanup(func() { host.Close(); guest.Close() })
	go func() {
		if err := agent.GuestHello(guest); err != nil || !answers {
			return
		}
		sess, err := yamux.Server(guest, agent.YamuxConfig(slog.Default()))
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
				return
			}
			if ops != nil {
				ops <- req.Op
			}
			switch req.Op {
			case agent.OpPowerOff:
				agent.Reply(st, nil)
				m.exit()
				return
			case agent.OpSettle, agent.OpFlushDisks:
				agent.Reply(st, nil) // the VM runs on until it is ended
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := agent.Connect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPowerOffPaths(t *testing.T) {
	const answer, acpi, settle = 300 * time.Millisecond, 500 * time.Millisecond, 700 * time.Millisecond
	tests := []struct {
		name      string
		agent     string // "", "answers", "silent"
		obeysACPI bool
		deadShare string
		want      string
		note      string
		max       time.Duration
	}{
		{name: "agent answers", agent: "answers", want: control.StopByAgent, max: answer},
		{name: "agent silent, ACPI works", agent: "silent", obeysACPI: true, want: control.StopByACPI, note: "did not take the power-off", max: answer + acpi/2},
		{name: "agent silent, ACPI ignored", agent: "silent", want: control.StopByForce, note: "did not power off within", max: answer + acpi + time.Second},
		{name: "no agent, ACPI works", obeysACPI: true, want: control.StopByACPI, note: "not connected", max: acpi / 2},
		{name: "no agent, ACPI ignored", want: control.StopByForce, note: "did not power off within", max: acpi + time.Second},
		// A guest with a dead virtiofs share would hang in its power-off
		// (neither the agent's nor ACPI's): it settles and is ended.
		{name: "dead share, agent answers", agent: "answers", deadShare: "/Users/me/src", want: control.StopBySettle, note: "/Users/me/src lost its daemon", max: answer},
		{name: "dead share, agent silent", agent: "silent", deadShare: "/Users/me/src", want: control.StopByForce, note: "did not settle", max: settle + time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newStubMachine(tt.obeysACPI)
			if tt.deadShare != "" {
				m.deadShares = []string{tt.deadShare}
			}
			var c *agent.Client
			if tt.agent != "" {
				c = guestAgent(t, m, tt.agent == "answers")
			}
			ha := &hostAgent{events: control.NewEventLog(), opts: Options{AgentAnswer: answer, ACPITimeout: acpi, SettleTimeout: settle, StopTimeout: time.Minute}}
			ha.opts.setDefaults()
			start := time.Now()
			got := ha.powerOff(context.Background(), m, c)
			took := time.Since(start)
			if got != tt.want {
				t.Fatalf("path %q, want %q", got, tt.want)
			}
			if took > tt.max {
				t.Fatalf("took %s, want at most %s", took, tt.max)
			}
			select {
			case <-m.done:
			default:
				t.Fatal("powerOff returned with the VM still running")
			}
			if tt.deadShare != "" && !m.forced {
				t.Fatal("the VM with a dead share was not ended")
			}
			past, _, cancel := ha.events.Follow()
			cancel()
			var notes []string
			for _, ev := range past {
				if ev.Step == "stop" && ev.State == "note" {
					notes = append(notes, ev.Detail)
				}
			}
			if all := strings.Join(notes, "\n"); tt.note != "" && !strings.Contains(all, tt.note) || tt.note == "" && all != "" {
				t.Fatalf("stop notes %q, want one with %q", all, tt.note)
			}
		})
	}
}

// TestForcedStopFlushesTheGuestFirst: a forced stop asks a connected
// guest to flush its disks before the VM is ended (a file written just
// before would die in its page cache), and a guest that does not answer
// delays it by no more than AgentAnswer.
func TestForcedStopFlushesTheGuestFirst(t *testing.T) {
	const answer = 300 * time.Millisecond
	for _, answers := range []bool{true, false} {
		m := newStubMachine(false)
		ops := make(chan string, 8)
		c := guestAgentSeeing(t, m, answers, ops)
		ha := &hostAgent{events: control.NewEventLog(), opts: Options{AgentAnswer: answer}}
		ha.opts.setDefaults()
		start := time.Now()
		ha.flushBeforeKill(context.Background(), c)
		if took := time.Since(start); took > answer+time.Second {
			t.Errorf("answers=%v: the flush took %s, want at most %s", answers, took, answer+time.Second)
		}
		past, _, cancel := ha.events.Follow()
		cancel()
		noted := len(past) > 0 && strings.Contains(past[len(past)-1].Detail, "did not flush its disks")
		if !answers {
			if !noted {
				t.Errorf("a silent guest's forced stop: notes %+v, want one that the flush did not happen", past)
			}
			continue
		}
		if noted {
			t.Errorf("an answering guest's forced stop noted a failed flush: %+v", past)
		}
		select {
		case op := <-ops:
			if op != agent.OpFlushDisks {
				t.Errorf("the guest was asked %q, want %q", op, agent.OpFlushDisks)
			}
		default:
			t.Error("the guest was never asked to flush its disks")
		}
	}
}
