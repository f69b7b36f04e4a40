package hostagent

import (
	"context"
	"fmt"
	"time"
)

// step is one named stage of the boot sequence. undo, when set, reverses
// it; the sequence runs the undos of completed steps in reverse order when
// a later step fails, and again at shutdown.
type step struct {
	name string
	run  func(ctx context.Context) error
	undo func(ctx context.Context) error
}

// sequence runs steps in order and remembers what to undo.
type sequence struct {
	events *eventLog
	done   []step
	timing []stepTiming
}

type stepTiming struct {
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
}

func (s *sequence) run(ctx context.Context, steps []step) error {
	for _, st := range steps {
		s.events.emit(st.name, "begin", "", "")
		start := time.Now()
		if err := st.run(ctx); err != nil {
			s.events.emit(st.name, "failed", err.Error(), "")
			return fmt.Errorf("%s: %w", st.name, err)
		}
		d := time.Since(start)
		s.timing = append(s.timing, stepTiming{Step: st.name, Seconds: d.Seconds()})
		s.events.emit(st.name, "done", "", d.Round(100*time.Millisecond).String())
		s.done = append(s.done, st)
	}
	return nil
}

// unwind undoes completed steps in reverse order, collecting every error so
// one failed undo does not leave the rest in place.
func (s *sequence) unwind(ctx context.Context) []error {
	var errs []error
	for i := len(s.done) - 1; i >= 0; i-- {
		st := s.done[i]
		if st.undo == nil {
			continue
		}
		if err := st.undo(ctx); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", st.name, err))
		}
	}
	s.done = nil
	return errs
}
