package forward

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/vmdock/vmdock/agent/lenprefix"
)

// MaxPacket is the largest datagram the 2-byte length prefix can carry.
const MaxPacket = lenprefix.Max

// PacketStream carries datagrams over a stream conn (a guest "udp" dial),
// framed by package lenprefix. ReadPacket and WritePacket are each safe
// for concurrent use.
type PacketStream struct {
	conn net.Conn
	rmu  sync.Mutex
	wmu  sync.Mutex
}

// NewPacketStream wraps conn; Close closes conn.
func NewPacketStream(conn net.Conn) *PacketStream { return &PacketStream{conn: conn} }

// ReadPacket reads one datagram into buf and returns its length. A
// datagram longer than buf fills buf and returns io.ErrShortBuffer; the
// next call gets the next datagram (the lenprefix rule).
func (s *PacketStream) ReadPacket(buf []byte) (int, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return lenprefix.Read(s.conn, buf)
}

// WritePacket sends p as one datagram.
func (s *PacketStream) WritePacket(p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return lenprefix.Write(s.conn, p)
}

// Conn is the underlying stream.
func (s *PacketStream) Conn() net.Conn { return s.conn }

// Close closes the underlying stream.
func (s *PacketStream) Close() error { return s.conn.Close() }

// RelayDatagrams joins a framed stream to a connected datagram socket
// until either side ends: each frame read from stream is sent as one
// datagram on dgram and each datagram received is written back as a frame.
// The guest side of a "udp" dial uses it; both conns are closed on return.
func RelayDatagrams(stream, dgram net.Conn) error {
	errc := make(chan error, 2)
	go func() {
		buf := make([]byte, MaxPacket)
		for {
			n, err := lenprefix.Read(stream, buf)
			if err != nil && !errors.Is(err, io.ErrShortBuffer) {
				errc <- err
				return
			}
			if _, err := dgram.Write(buf[:n]); err != nil {
				errc <- fmt.Errorf("send datagram: %w", err)
				return
			}
		}
	}()
	go func() {
		buf := make([]byte, MaxPacket)
		for {
			n, err := dgram.Read(buf)
			if errors.Is(err, syscall.ECONNREFUSED) {
				// An ICMP "port unreachable" for an earlier datagram: UDP
				// carries on, the next datagram may find a listener.
				continue
			}
			if err != nil {
				errc <- fmt.Errorf("receive datagram: %w", err)
				return
			}
			if err := lenprefix.Write(stream, buf[:n]); err != nil {
				errc <- err
				return
			}
		}
	}()
	err := <-errc
	stream.Close()
	dgram.Close()
	<-errc
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
