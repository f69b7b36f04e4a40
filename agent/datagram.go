package agent

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
)

// MaxDatagram is the largest datagram a udp dial stream carries.
const MaxDatagram = 65535

// DatagramConn gives a udp dial stream message boundaries again: each Write
// sends one datagram, each Read returns one. Both the host forwarder and the
// guest use it.
type DatagramConn struct {
	net.Conn
	rmu, wmu sync.Mutex
	hdr      [2]byte
}

// NewDatagramConn wraps a stream that carries length-prefixed datagrams.
func NewDatagramConn(stream net.Conn) *DatagramConn { return &DatagramConn{Conn: stream} }

// Write sends p as one datagram.
func (c *DatagramConn) Write(p []byte) (int, error) {
	if len(p) > MaxDatagram {
		return 0, fmt.Errorf("datagram of %d bytes exceeds %d", len(p), MaxDatagram)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	buf := make([]byte, 2+len(p))
	binary.BigEndian.PutUint16(buf, uint16(len(p)))
	copy(buf[2:], p)
	if _, err := c.Conn.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Read returns the next datagram; like UDP, a short p truncates it.
func (c *DatagramConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if _, err := io.ReadFull(c.Conn, c.hdr[:]); err != nil {
		return 0, err
	}
	n := int(binary.BigEndian.Uint16(c.hdr[:]))
	if n <= len(p) {
		_, err := io.ReadFull(c.Conn, p[:n])
		return n, noEOF(err)
	}
	if _, err := io.ReadFull(c.Conn, p); err != nil {
		return 0, noEOF(err)
	}
	_, err := io.CopyN(io.Discard, c.Conn, int64(n-len(p)))
	return len(p), noEOF(err)
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
