package usernet

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Frames the NIC's socket may carry to the switch. gvisor-tap-vsock's
// switch reads the Ethernet header of whatever it is given without a
// length check: a frame shorter than the header panicked it, under its
// address table's lock (every frame after deadlocked) or, to the broadcast
// address, in the host agent's goroutine, which ended the process. A
// length over maxFrameSize is no NIC's either (the guest's MTU is 1500);
// the switch would allocate whatever the 4-byte prefix says.
const (
	minFrameSize = header.EthernetMinimumSize
	maxFrameSize = 64 << 10
)

// frameFilter sits between the NIC's socket and the switch and drops
// malformed frames, so the switch only ever reads whole Ethernet headers.
// stream: QEMU's framing (a 4-byte big-endian length before each frame);
// otherwise one frame per datagram (vz's).
type frameFilter struct {
	net.Conn
	stream  bool
	r       *bufio.Reader
	pending []byte // the rest of a checked frame, with its length prefix
	size    [4]byte
	dropped func(size int)
}

func newFrameFilter(conn net.Conn, stream bool, dropped func(size int)) *frameFilter {
	return &frameFilter{Conn: conn, stream: stream, r: bufio.NewReaderSize(conn, 64<<10), dropped: dropped}
}

func (f *frameFilter) Read(p []byte) (int, error) {
	if !f.stream {
		return f.readDatagram(p)
	}
	if len(f.pending) == 0 {
		if err := f.nextStreamFrame(); err != nil {
			return 0, err
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// readDatagram returns the next datagram that holds a whole Ethernet
// header; the switch reads into a buffer larger than any frame.
func (f *frameFilter) readDatagram(p []byte) (int, error) {
	for {
		n, err := f.Conn.Read(p)
		if err != nil {
			return n, err
		}
		if n >= minFrameSize {
			return n, nil
		}
		f.dropped(n)
	}
}

// nextStreamFrame reads frames until one fits, skipping the others whole
// so the stream stays in step.
func (f *frameFilter) nextStreamFrame() error {
	for {
		if _, err := io.ReadFull(f.r, f.size[:]); err != nil {
			return err
		}
		size := binary.BigEndian.Uint32(f.size[:])
		if size < minFrameSize || size > maxFrameSize {
			f.dropped(int(size))
			if _, err := io.CopyN(io.Discard, f.r, int64(size)); err != nil {
				return err
			}
			continue
		}
		frame := make([]byte, 4+int(size))
		copy(frame, f.size[:])
		if _, err := io.ReadFull(f.r, frame[4:]); err != nil {
			return err
		}
		f.pending = frame
		return nil
	}
}

// noteMalformed counts a dropped frame and logs the first of the stack's
// life: a guest sending them is broken or hostile, and one line says so
// without letting it fill the log.
func (s *Stack) noteMalformed(size int) {
	if s.counts.malformed.Add(1) == 1 {
		s.log.Warn("usernet: dropped a malformed frame from the guest (further ones are dropped without a word)",
			"bytes", size, "accepted", fmt.Sprintf("%d-%d bytes", minFrameSize, maxFrameSize))
	}
}

// recoverPanic keeps a panic in the stack's goroutines (the switch, the
// relays, the services) from ending the host agent: it is logged with its
// stack, and only what panicked stops. Deferred directly.
func (s *Stack) recoverPanic(what string) {
	if p := recover(); p != nil {
		s.notePanic(what, p)
	}
}

func (s *Stack) notePanic(what string, p any) {
	s.counts.panics.Add(1)
	s.log.Error("usernet: "+what+" panicked; recovered", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
}

// stackCounts are the stack's counters for status.
type stackCounts struct {
	malformed atomic.Int64
	panics    atomic.Int64
	// hostDialsFailed: the guest's TCP connections whose host dial
	// failed; dnsServing: the DNS serving loops still running.
	hostDialsFailed atomic.Int64
	dnsServing      atomic.Int32
}
