// Package lenprefix is vmdock's one framing with a 2-byte length prefix:
// each frame is a big-endian uint16 payload length followed by the
// payload. It carries udp datagrams over agent streams (host forwarder and
// guest agent) and DNS messages over TCP (RFC 1035 section 4.2.2). It
// imports nothing from vmdock, so both agent and network can use it.
//
// The rules, the same for every user:
//
//   - Write sends header and payload in one Write call, so writers that
//     serialise on a conn never interleave frames. A payload over Max is
//     refused with ErrTooLarge and nothing is written.
//   - Short buffer: when a frame's payload is longer than the caller's
//     buffer, Read fills the buffer with the payload's first bytes,
//     discards the rest, and returns len(buf) with io.ErrShortBuffer. The
//     stream stays in sync: the next Read starts at the next frame. This is
//     a UDP read's truncation made visible, so no caller mistakes a cut
//     datagram or DNS message for a whole one.
//   - End of stream: io.EOF only at a frame boundary; an end inside a
//     header or payload is io.ErrUnexpectedEOF.
package lenprefix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Max is the largest payload the 2-byte length prefix can describe.
const Max = 0xffff

// ErrTooLarge is returned by Write for a payload longer than Max.
var ErrTooLarge = errors.New("frame payload larger than 65535 bytes")

// Write sends p as one frame.
func Write(w io.Writer, p []byte) error {
	if len(p) > Max {
		return fmt.Errorf("write frame of %d bytes: %w", len(p), ErrTooLarge)
	}
	frame := make([]byte, 2+len(p))
	binary.BigEndian.PutUint16(frame, uint16(len(p)))
	copy(frame[2:], p)
	if _, err := w.Write(frame); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// Read reads the next frame's payload into buf and returns its length. See
// the package comment for a payload longer than buf and for the end of
// the stream. Errors before the first header byte (a closed conn, a
// deadline) are returned as they are.
func Read(r io.Reader, buf []byte) (int, error) {
	size, err := readHeader(r)
	if err != nil {
		return 0, err
	}
	n := min(size, len(buf))
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return 0, fmt.Errorf("read frame of %d bytes: %w", size, noEOF(err))
	}
	if n == size {
		return n, nil
	}
	if _, err := io.CopyN(io.Discard, r, int64(size-n)); err != nil {
		return 0, fmt.Errorf("skip %d bytes of a %d-byte frame: %w", size-n, size, noEOF(err))
	}
	return n, io.ErrShortBuffer
}

// ReadFrame reads the next frame into a new slice of exactly its size, for
// callers that need whole messages and cannot pick a buffer size up front.
func ReadFrame(r io.Reader) ([]byte, error) {
	size, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	p := make([]byte, size)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, fmt.Errorf("read frame of %d bytes: %w", size, noEOF(err))
	}
	return p, nil
}

func readHeader(r io.Reader) (int, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("read frame header: %w", err)
		}
		return 0, err
	}
	return int(binary.BigEndian.Uint16(hdr[:])), nil
}

// noEOF turns an EOF inside a frame into io.ErrUnexpectedEOF: only a frame
// boundary is a clean end.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
