package hostagent

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"
)

func TestSequenceUndoesCompletedStepsInReverseOnFailure(t *testing.T) {
	var log []string
	mk := func(name string, fail bool) step {
		return step{
			name: name,
			run: func(context.Context) error {
				log = append(log, "run "+name)
				if fail {
					return errors.New("boom")
				}
				return nil
			},
			undo: func(context.Context) error { log = append(log, "undo "+name); return nil },
		}
	}
	s := &sequence{events: control.NewEventLog()}
	err := s.run(context.Background(), []step{mk("a", false), mk("b", false), mk("c", true), mk("d", false)})
	if err == nil || !strings.HasPrefix(err.Error(), "c: ") {
		t.Fatalf("err = %v, want it to name step c", err)
	}
	s.unwind(context.Background())
	want := []string{"run a", "run b", "run c", "undo b", "undo a"}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("log = %v, want %v", log, want)
	}
	past, _, cancel := s.events.Follow()
	cancel()
	last := past[len(past)-1]
	if last.Step != "c" || last.State != "failed" || last.Error != "boom" {
		t.Fatalf("last event = %+v", last)
	}
}

func TestUnwindKeepsGoingAfterAFailedUndo(t *testing.T) {
	var undone []string
	s := &sequence{events: control.NewEventLog()}
	s.done = []step{
		{name: "a", undo: func(context.Context) error { undone = append(undone, "a"); return nil }},
		{name: "b", undo: func(context.Context) error { undone = append(undone, "b"); return errors.New("stuck") }},
	}
	errs := s.unwind(context.Background())
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "undo b") {
		t.Fatalf("errs = %v", errs)
	}
	if !reflect.DeepEqual(undone, []string{"b", "a"}) {
		t.Fatalf("undone = %v", undone)
	}
}

// The step timings reach the control API's status once the instance is
// up (the bench reads them there), and not while it is still booting.
func TestStatusCarriesBootReport(t *testing.T) {
	ha := &hostAgent{inst: &store.Instance{Name: "x", Dir: t.TempDir()}, events: control.NewEventLog(), run: runState{phase: control.PhaseStarting}}
	ha.seq = &sequence{events: ha.events}
	slow := func(context.Context) error { time.Sleep(20 * time.Millisecond); return nil }
	if err := ha.seq.run(context.Background(), []step{{name: "vm", run: slow}, {name: "agent", run: slow}}); err != nil {
		t.Fatal(err)
	}
	if st := ha.status(); st.Boot != nil {
		t.Fatalf("boot report while starting: %+v", st.Boot)
	}
	ha.boot.hello = agent.Info{Version: "v", Kernel: "6.12", Uptime: 7.5}
	ha.setPhase(control.PhaseRunning)
	st := ha.status()
	if st.Boot == nil || len(st.Boot.Steps) != 2 || st.Boot.Steps[0].Step != "vm" || st.Boot.Steps[1].Step != "agent" ||
		st.Boot.Steps[0].Seconds < 0.02 || st.Boot.GuestUptime != 7.5 || st.Boot.GuestKernel != "6.12" {
		t.Fatalf("boot report = %+v", st.Boot)
	}
}
