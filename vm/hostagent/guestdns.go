package hostagent

import (
	"context"
	"sync"
	"time"

	"github.com/vmdock/vmdock/vm/control"
)

// The guest's DNS upstreams are asked for in the background and status
// reports the last answer: a status must answer at once, also while the
// guest agent is gone (the CLI takes a host agent that does not answer
// within 2 s for a dead one). guestDNSFresh is how old an answer may be
// before a status asks again; guestDNSAnswer bounds one question.
const (
	guestDNSFresh  = 5 * time.Second
	guestDNSAnswer = 2 * time.Second
)

// guestDNSCache is the last answer and whether a question is out.
type guestDNSCache struct {
	mu     sync.Mutex
	last   *control.GuestDNSStatus
	at     time.Time
	asking bool
}

// guestDNS returns the last answer at once, and asks the guest again in
// the background when it is older than guestDNSFresh; nil before the
// first answer or without a session.
func (ha *hostAgent) guestDNS() *control.GuestDNSStatus {
	g := &ha.guestDNSAsk
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.asking && time.Since(g.at) >= guestDNSFresh {
		g.asking = true
		go ha.askGuestDNS()
	}
	if g.last == nil {
		return nil
	}
	out := *g.last
	return &out
}

// askGuestDNS asks the guest agent where its DNS forwarder sends lookups
// and keeps the answer; without a session it keeps nothing.
func (ha *hostAgent) askGuestDNS() {
	var st *control.GuestDNSStatus
	if c := ha.liveClient(); c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), guestDNSAnswer)
		info, err := c.Info(ctx)
		cancel()
		st = &control.GuestDNSStatus{Upstreams: []string{}}
		if err != nil {
			st.Error = err.Error()
		} else if info.DNSUpstreams != nil {
			st.Upstreams = info.DNSUpstreams
		}
	}
	g := &ha.guestDNSAsk
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asking, g.at = false, time.Now()
	if st != nil {
		g.last = st
	}
}
