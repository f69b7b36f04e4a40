// Package connpipe copies bytes both ways between two connections and
// passes each end-of-stream on as a half-close. It is a leaf: the host's
// forwarders (network, vm/control, vm/hostagent) and the guest agent
// (agent/guest) share it without importing each other.
package connpipe

import (
	"errors"
	"io"
	"net"
	"sync"
)

// CloseWriter is a conn that can shut down its sending side while still
// reading (TCP, unix sockets, a yamux stream's Close).
type CloseWriter interface {
	CloseWrite() error
}

// Pipe copies a<->b until both directions end, passing each end-of-stream
// on as a half-close so request/response protocols that shut down their
// sending side (docker attach with stdin, `nc -N`, HTTP/1.0 clients,
// rsync) still get the reply. It closes both conns before it returns.
func Pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); copyHalf(b, a) }()
	go func() { defer wg.Done(); copyHalf(a, b) }()
	wg.Wait()
	a.Close()
	b.Close()
}

// copyHalf copies src into dst, then half-closes dst. When the copy fails
// (not a clean EOF) both conns are closed, so the other direction ends too
// instead of waiting forever on a peer that is gone.
func copyHalf(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(CloseWriter); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	// Without a half-close the other direction may still carry a reply;
	// Pipe closes dst once both directions are done.
}

// CloseIsCloseWrite gives c, whose Close already ends only its sending
// side (a yamux stream: reads go on until the peer's FIN), the CloseWrite
// Pipe looks for, so an end of input is passed on through it. Without it
// an echo-style exchange (send, shut down writing, read the reply) waits
// forever.
func CloseIsCloseWrite(c net.Conn) net.Conn { return closeIsCloseWrite{c} }

type closeIsCloseWrite struct{ net.Conn }

func (c closeIsCloseWrite) CloseWrite() error { return c.Conn.Close() }
