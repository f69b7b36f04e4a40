package syncmount

import (
	"net"
	"sync"
	"time"
)

// closingConn makes Close abort the stream in both directions. Mutagen
// requires that Close unblocks pending reads and writes, but a yamux stream's
// Close only sends FIN: a Read keeps waiting for the peer. Expiring the
// deadlines wakes any blocked Read or Write at once.
type closingConn struct {
	net.Conn
	once sync.Once
	err  error
}

func wrapConn(c net.Conn) *closingConn {
	if cc, ok := c.(*closingConn); ok {
		return cc
	}
	return &closingConn{Conn: c}
}

func (c *closingConn) Close() error {
	c.once.Do(func() {
		c.err = c.Conn.Close()
		// Some transports (net.Pipe) refuse deadlines once closed; they
		// already unblocked everything, so the error does not matter.
		_ = c.Conn.SetDeadline(time.Now())
	})
	return c.err
}
