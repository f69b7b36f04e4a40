package agent

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// maxFrame bounds one exec frame; writers split larger payloads.
const maxFrame = 1 << 20

// FrameWriter writes exec frames; safe for concurrent use.
type FrameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewFrameWriter writes frames to w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// WriteFrame sends one frame of kind with payload.
func (f *FrameWriter) WriteFrame(kind byte, payload []byte) error {
	for {
		chunk := payload
		if len(chunk) > maxFrame {
			chunk = chunk[:maxFrame]
		}
		buf := make([]byte, 5+len(chunk))
		buf[0] = kind
		binary.BigEndian.PutUint32(buf[1:], uint32(len(chunk)))
		copy(buf[5:], chunk)
		f.mu.Lock()
		_, err := f.w.Write(buf)
		f.mu.Unlock()
		if err != nil {
			return err
		}
		payload = payload[len(chunk):]
		if len(payload) == 0 {
			return nil
		}
	}
}

// Writer returns an io.Writer that sends everything as frames of kind.
func (f *FrameWriter) Writer(kind byte) io.Writer { return frameKindWriter{f, kind} }

type frameKindWriter struct {
	f    *FrameWriter
	kind byte
}

func (w frameKindWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := w.f.WriteFrame(w.kind, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// ReadFrame reads one frame.
func ReadFrame(r io.Reader) (kind byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("exec frame of %d bytes exceeds %d", n, maxFrame)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, noEOF(err)
	}
	return hdr[0], payload, nil
}

// ResizePayload encodes a terminal size for FrameResize.
func ResizePayload(rows, cols uint16) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint16(b, rows)
	binary.BigEndian.PutUint16(b[2:], cols)
	return b
}

// ParseResize decodes a FrameResize payload.
func ParseResize(p []byte) (rows, cols uint16, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("resize frame has %d bytes, want 4", len(p))
	}
	return binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:]), nil
}

// noEOF turns an EOF inside a frame into ErrUnexpectedEOF: only a frame
// boundary is a clean end.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
