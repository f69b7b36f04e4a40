package agent

import (
	"net"
	"sync"

	"github.com/vmdock/vmdock/agent/lenprefix"
)

// MaxDatagram is the largest datagram a udp dial stream carries.
const MaxDatagram = lenprefix.Max

// DatagramConn gives a udp dial stream message boundaries again: each Write
// sends one datagram, each Read returns one. The frames follow package
// lenprefix, like the host forwarder's network.PacketStream on the other
// end.
type DatagramConn struct {
	net.Conn
	rmu, wmu sync.Mutex
}

// NewDatagramConn wraps a stream that carries length-prefixed datagrams.
func NewDatagramConn(stream net.Conn) *DatagramConn { return &DatagramConn{Conn: stream} }

// Write sends p as one datagram.
func (c *DatagramConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := lenprefix.Write(c.Conn, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Read returns the next datagram. A datagram longer than p fills p and
// returns io.ErrShortBuffer; the next Read gets the next datagram.
func (c *DatagramConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return lenprefix.Read(c.Conn, p)
}
