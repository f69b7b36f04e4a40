package hostagent

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
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
	s := &sequence{events: newEventLog()}
	err := s.run(context.Background(), []step{mk("a", false), mk("b", false), mk("c", true), mk("d", false)})
	if err == nil || !strings.HasPrefix(err.Error(), "c: ") {
		t.Fatalf("err = %v, want it to name step c", err)
	}
	s.unwind(context.Background())
	want := []string{"run a", "run b", "run c", "undo b", "undo a"}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("log = %v, want %v", log, want)
	}
	past, _, cancel := s.events.follow()
	cancel()
	last := past[len(past)-1]
	if last.Step != "c" || last.State != "failed" || last.Error != "boom" {
		t.Fatalf("last event = %+v", last)
	}
}

func TestUnwindKeepsGoingAfterAFailedUndo(t *testing.T) {
	var undone []string
	s := &sequence{events: newEventLog()}
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
