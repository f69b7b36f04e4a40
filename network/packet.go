package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
)

// MaxPacket is the largest datagram the 2-byte length prefix can carry.
const MaxPacket = 0xffff

// ErrPacketTooLarge is returned when a datagram does not fit the frame.
var ErrPacketTooLarge = errors.New("datagram larger than 65535 bytes")

// WritePacket writes p as one frame: a 2-byte big-endian length, then p.
// Header and payload go out in one Write so that concurrent writers that
// serialise on the conn cannot interleave a frame.
func WritePacket(w io.Writer, p []byte) error {
	if len(p) > MaxPacket {
		return fmt.Errorf("write datagram of %d bytes: %w", len(p), ErrPacketTooLarge)
	}
	frame := make([]byte, 2+len(p))
	binary.BigEndian.PutUint16(frame, uint16(len(p)))
	copy(frame[2:], p)
	if _, err := w.Write(frame); err != nil {
		return fmt.Errorf("write datagram: %w", err)
	}
	return nil
}

// ReadPacket reads one frame into buf and returns the payload length. A
// payload longer than buf is truncated like a UDP read: the rest is
// discarded (the stream stays in sync) and io.ErrShortBuffer is returned
// with n == len(buf). A clean end of stream between frames is io.EOF.
func ReadPacket(r io.Reader, buf []byte) (int, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("read datagram header: %w", err)
		}
		return 0, err
	}
	size := int(binary.BigEndian.Uint16(hdr[:]))
	n := min(size, len(buf))
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return 0, fmt.Errorf("read datagram of %d bytes: %w", size, noEOF(err))
	}
	if n < size {
		if _, err := io.CopyN(io.Discard, r, int64(size-n)); err != nil {
			return 0, fmt.Errorf("skip datagram tail: %w", noEOF(err))
		}
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// noEOF turns an EOF inside a frame into ErrUnexpectedEOF: only a frame
// boundary is a clean end.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// PacketStream carries datagrams over a stream conn (a guest "udp" dial).
// ReadPacket and WritePacket are each safe for concurrent use.
type PacketStream struct {
	conn net.Conn
	rmu  sync.Mutex
	wmu  sync.Mutex
}

// NewPacketStream wraps conn; Close closes conn.
func NewPacketStream(conn net.Conn) *PacketStream { return &PacketStream{conn: conn} }

// ReadPacket reads one datagram into buf (see the package ReadPacket).
func (s *PacketStream) ReadPacket(buf []byte) (int, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return ReadPacket(s.conn, buf)
}

// WritePacket sends p as one datagram.
func (s *PacketStream) WritePacket(p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return WritePacket(s.conn, p)
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
			n, err := ReadPacket(stream, buf)
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
			if err := WritePacket(stream, buf[:n]); err != nil {
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
