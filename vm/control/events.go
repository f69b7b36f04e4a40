package control

import (
	"sync"
	"time"
)

// EventLog keeps every event of a host agent's life, so a `vmdock start`
// that connects late still sees the whole sequence, and fans new events out
// to live followers.
type EventLog struct {
	mu        sync.Mutex
	events    []Event
	followers map[chan Event]struct{}
	step      string
}

// NewEventLog returns an empty log.
func NewEventLog() *EventLog {
	return &EventLog{followers: map[chan Event]struct{}{}}
}

// Emit records one event and passes it to the followers.
func (l *EventLog) Emit(step, state, errText, detail string) {
	l.add(Event{Step: step, State: state, Error: errText, Detail: detail})
}

// Done records that step finished after d.
func (l *EventLog) Done(step string, d time.Duration) {
	l.add(Event{Step: step, State: EventDone, Detail: d.Round(100 * time.Millisecond).String(), Seconds: d.Seconds()})
}

func (l *EventLog) add(ev Event) {
	ev.Time = time.Now().UTC().Format(time.RFC3339Nano)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	if ev.State == EventBegin {
		l.step = ev.Step
	}
	for ch := range l.followers {
		select {
		case ch <- ev:
		default: // a follower that cannot keep up misses live events, never blocks the agent
		}
	}
}

// Follow returns the past events, a channel of the next ones, and the
// function that stops following.
func (l *EventLog) Follow() ([]Event, <-chan Event, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan Event, 64)
	l.followers[ch] = struct{}{}
	past := append([]Event(nil), l.events...)
	return past, ch, func() {
		l.mu.Lock()
		delete(l.followers, ch)
		l.mu.Unlock()
	}
}

// StepTimes are the durations of the steps that completed, in order: the
// boot report is read off the same events `start` prints.
func (l *EventLog) StepTimes() []StepTime {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []StepTime
	for _, ev := range l.events {
		if ev.State == EventDone {
			out = append(out, StepTime{Step: ev.Step, Seconds: ev.Seconds})
		}
	}
	return out
}

// CurrentStep is the step that began last.
func (l *EventLog) CurrentStep() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.step
}
