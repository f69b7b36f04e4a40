package usernet

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// dnsQueryLifetime is how long a query that was never answered counts as
// in flight (the DNS server drops some without a word): far past any
// resolver's timeout.
const dnsQueryLifetime = 60 * time.Second

// dnsLimit counts the queries the stack's DNS is answering, over UDP by
// (client, query ID) until the answer goes out and over TCP by open
// connection, and admits no more than max at once: the DNS server starts
// a goroutine and a host lookup for every query it reads.
type dnsLimit struct {
	s       *Stack
	max     int
	mu      sync.Mutex
	pending map[dnsQuery][]time.Time
	queries int
	tcpOpen int
}

type dnsQuery struct {
	from string
	id   uint16
}

func (d *dnsLimit) inFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(time.Now())
	return d.queries + d.tcpOpen
}

// expire forgets queries older than dnsQueryLifetime. Under mu.
func (d *dnsLimit) expire(now time.Time) {
	for q, times := range d.pending {
		kept := times[:0]
		for _, t := range times {
			if now.Sub(t) < dnsQueryLifetime {
				kept = append(kept, t)
			}
		}
		d.queries -= len(times) - len(kept)
		if len(kept) == 0 {
			delete(d.pending, q)
		} else {
			d.pending[q] = kept
		}
	}
}

// admit takes a slot for q, false at the cap.
func (d *dnsLimit) admit(q dnsQuery) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if d.queries+d.tcpOpen >= d.max {
		d.expire(now)
		if d.queries+d.tcpOpen >= d.max {
			return false
		}
	}
	if d.pending == nil {
		d.pending = map[dnsQuery][]time.Time{}
	}
	d.pending[q] = append(d.pending[q], now)
	d.queries++
	return true
}

// answered frees q's oldest slot.
func (d *dnsLimit) answered(q dnsQuery) {
	d.mu.Lock()
	defer d.mu.Unlock()
	times := d.pending[q]
	if len(times) == 0 {
		return
	}
	if len(times) == 1 {
		delete(d.pending, q)
	} else {
		d.pending[q] = times[1:]
	}
	d.queries--
}

func (d *dnsLimit) openTCP() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.queries+d.tcpOpen >= d.max {
		return false
	}
	d.tcpOpen++
	return true
}

func (d *dnsLimit) closeTCP() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tcpOpen--
}

// dnsPacketConn is the DNS server's UDP socket in the stack, admitting
// queries within the limit and dropping the rest.
type dnsPacketConn struct {
	net.PacketConn
	limit *dnsLimit
}

func (c dnsPacketConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, from, err := c.PacketConn.ReadFrom(p)
		if err != nil || n < 2 {
			return n, from, err
		}
		if c.limit.admit(dnsQuery{from: from.String(), id: binary.BigEndian.Uint16(p)}) {
			return n, from, nil
		}
		c.limit.s.noteCap(capDNS, "limit", c.limit.max)
	}
}

func (c dnsPacketConn) WriteTo(p []byte, to net.Addr) (int, error) {
	n, err := c.PacketConn.WriteTo(p, to)
	if len(p) >= 2 {
		c.limit.answered(dnsQuery{from: to.String(), id: binary.BigEndian.Uint16(p)})
	}
	return n, err
}

// dnsListener is the DNS server's TCP listener in the stack: a connection
// past the limit is closed at once.
type dnsListener struct {
	net.Listener
	limit *dnsLimit
}

func (l dnsListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.limit.openTCP() {
			return &dnsConn{Conn: c, limit: l.limit}, nil
		}
		c.Close()
		l.limit.s.noteCap(capDNS, "limit", l.limit.max)
	}
}

type dnsConn struct {
	net.Conn
	limit *dnsLimit
	once  sync.Once
}

func (c *dnsConn) Close() error {
	c.once.Do(c.limit.closeTCP)
	return c.Conn.Close()
}
