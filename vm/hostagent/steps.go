package hostagent

import (
	"context"
	"fmt"
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
}

func (s *sequence) run(ctx context.Context, steps []step) error {
	for _, st := range steps {
		s.events.Emit(st.name, control.EventBegin, "", "")
		start := time.Now()
		if err := st.run(ctx); err != nil {
			s.events.Emit(st.name, control.EventFailed, err.Error(), "")
			return fmt.Errorf("%s: %w", st.name, err)
		}
		s.events.Done(st.name, time.Since(start))
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
