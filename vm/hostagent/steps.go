package hostagent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vmdock/vmdock/vm/control"
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
	events *control.EventLog
	done   []step
	mu     sync.Mutex // timing is read by status requests while steps run
	timing []control.StepTime
}

func (s *sequence) run(ctx context.Context, steps []step) error {
	for _, st := range steps {
		s.events.Emit(st.name, control.EventBegin, "", "")
		start := time.Now()
		if err := st.run(ctx); err != nil {
			s.events.Emit(st.name, control.EventFailed, err.Error(), "")
			return fmt.Errorf("%s: %w", st.name, err)
		}
		d := time.Since(start)
		s.mu.Lock()
		s.timing = append(s.timing, control.StepTime{Step: st.name, Seconds: d.Seconds()})
		s.mu.Unlock()
		s.events.Done(st.name, d)
		s.done = append(s.done, st)
	}
	return nil
}

// timings are the durations of the steps that completed, in order.
func (s *sequence) timings() []control.StepTime {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]control.StepTime(nil), s.timing...)
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
