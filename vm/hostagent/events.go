package hostagent

import (
	"sync"
	"time"

	"github.com/vmdock/vmdock/vm"
)

// eventLog keeps every event of this host agent's life so a `vmdock start`
// that connects late still sees the whole sequence, and fans new events out
// to live followers.
type eventLog struct {
	mu        sync.Mutex
	events    []vm.Event
	followers map[chan vm.Event]struct{}
	step      string
}

func newEventLog() *eventLog {
	return &eventLog{followers: map[chan vm.Event]struct{}{}}
}

func (l *eventLog) emit(step, state, errText, detail string) {
	ev := vm.Event{Time: time.Now().UTC().Format(time.RFC3339Nano), Step: step, State: state, Error: errText, Detail: detail}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	if state == "begin" {
		l.step = step
	}
	for ch := range l.followers {
		select {
		case ch <- ev:
		default: // a follower that cannot keep up misses live events, never blocks the agent
		}
	}
}

// follow returns the past events and a channel of the next ones.
func (l *eventLog) follow() ([]vm.Event, chan vm.Event, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan vm.Event, 64)
	l.followers[ch] = struct{}{}
	past := append([]vm.Event(nil), l.events...)
	return past, ch, func() {
		l.mu.Lock()
		delete(l.followers, ch)
		l.mu.Unlock()
	}
}

func (l *eventLog) currentStep() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.step
}
