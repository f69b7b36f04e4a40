package usernet

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// Limits cap what one VM's guest holds on the host through the stack.
// Every relayed flow is a host socket (and a UDP flow ~128 KiB of
// buffers): without caps, a container opening flows in a loop took the host
// agent past its file limit and gigabytes of memory.
type Limits struct {
	// UDPFlows: relayed UDP flows at once; a new flow past it ends the one
	// idle the longest.
	UDPFlows int
	// TCPRelays: relayed TCP connections at once, those being dialled
	// included; the guest's connections past it are reset.
	TCPRelays int
	// DNSInFlight: queries to the stack's DNS being answered at once (a
	// lookup on the host's resolver can take its whole timeout); queries
	// past it are dropped, and the guest's resolver retries.
	DNSInFlight int
	// PendingDialsPerDest: the guest's connections to one address being
	// dialled on the host at once. A destination that drops SYNs holds
	// each for the whole dial timeout; past this, its further SYNs are
	// dropped (the guest retries them), so they never fill the stack's
	// table of pending connections, which every destination shares.
	PendingDialsPerDest int
}

// DefaultLimits are far above what a developer's containers use, and far
// below the host agent's file limit.
var DefaultLimits = Limits{UDPFlows: 1024, TCPRelays: 2048, DNSInFlight: 256, PendingDialsPerDest: 16}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.UDPFlows > 0 {
		d.UDPFlows = l.UDPFlows
	}
	if l.TCPRelays > 0 {
		d.TCPRelays = l.TCPRelays
	}
	if l.DNSInFlight > 0 {
		d.DNSInFlight = l.DNSInFlight
	}
	if l.PendingDialsPerDest > 0 {
		d.PendingDialsPerDest = l.PendingDialsPerDest
	}
	return d
}

// Stats are the guest's relays now and what the limits and the frame
// filter turned away since the stack started.
type Stats struct {
	Limits       Limits
	UDPFlows     int
	TCPRelays    int
	DNSInFlight  int
	PendingDials int
	// UDPEvicted: flows ended for a new one; TCPRefused: connections reset
	// at the cap; DNSDropped: queries dropped at the cap; DialsDeferred:
	// SYNs dropped for their destination's pending dials.
	UDPEvicted      int64
	TCPRefused      int64
	DNSDropped      int64
	DialsDeferred   int64
	MalformedFrames int64
	Panics          int64
	// HostDialsFailed: the guest's TCP connections whose host dial failed
	// (the host's network away, or the far end refusing); DNSServing:
	// whether the stack's DNS server still serves (an isolated stack's
	// refusals count).
	HostDialsFailed int64
	DNSServing      bool
}

// Stats reports the stack's relays and counters.
func (s *Stack) Stats() Stats {
	st := Stats{
		Limits:          s.limits,
		UDPFlows:        s.udp.count(),
		TCPRelays:       int(s.tcpRelays.Load()),
		DNSInFlight:     s.dns.inFlight(),
		PendingDials:    s.dials.total(),
		MalformedFrames: s.counts.malformed.Load(),
		Panics:          s.counts.panics.Load(),
		HostDialsFailed: s.counts.hostDialsFailed.Load(),
		DNSServing:      s.cfg.Isolated || s.counts.dnsServing.Load() == dnsServeLoops,
	}
	for i, n := range []*int64{&st.UDPEvicted, &st.TCPRefused, &st.DNSDropped, &st.DialsDeferred} {
		*n = s.capped[i].Load()
	}
	return st
}

// A cap that bit, for its counter and its one log line.
type capKind int

const (
	capUDP capKind = iota
	capTCP
	capDNS
	capDials
	capKinds
)

var capWords = [capKinds]string{
	capUDP:   "the guest reached the cap of relayed UDP flows: the flow idle the longest is ended for each new one",
	capTCP:   "the guest reached the cap of relayed TCP connections: further connections are reset until some close",
	capDNS:   "the guest reached the cap of DNS queries in flight: further queries are dropped until some are answered",
	capDials: "the guest's connections to one address are stuck in their dials: further ones to it wait (their SYNs dropped)",
}

// noteCap counts a cap biting and logs the first time each cap bites in
// the stack's life: a flood would otherwise fill the log.
func (s *Stack) noteCap(k capKind, attrs ...any) {
	if s.capped[k].Add(1) == 1 {
		s.log.Warn("usernet: "+capWords[k]+" (logged once; `vmdock status` counts them)", attrs...)
	}
}

// pendingDials counts the host dials under way per destination address.
type pendingDials struct {
	mu     sync.Mutex
	byDest map[tcpip.Address]int
	n      int
}

// begin takes a slot for dst, false when it has max already.
func (p *pendingDials) begin(dst tcpip.Address, max int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byDest[dst] >= max {
		return false
	}
	if p.byDest == nil {
		p.byDest = map[tcpip.Address]int{}
	}
	p.byDest[dst]++
	p.n++
	return true
}

func (p *pendingDials) end(dst tcpip.Address) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n--
	if p.byDest[dst]--; p.byDest[dst] <= 0 {
		delete(p.byDest, dst)
	}
}

func (p *pendingDials) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// takeSlot adds one to n unless it is at max.
func takeSlot(n *atomic.Int64, max int) bool {
	for {
		cur := n.Load()
		if cur >= int64(max) {
			return false
		}
		if n.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}
