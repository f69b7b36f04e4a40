package network

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Pipe copies a<->b until both directions end, passing each end-of-stream
// on as a half-close so request/response protocols that shut down their
// sending side (docker attach with stdin, `nc -N`) still get the reply.
// It closes both conns before it returns.
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

// dialAndPipe connects c to a new guest connection and pipes the two until
// both ends are done. Both stay in conns meanwhile, so a forwarder's Close
// ends them; a forwarder that is closing refuses the new guest conn.
func dialAndPipe(ctx context.Context, c net.Conn, conns *connSet, timeout time.Duration, dial func(ctx context.Context) (net.Conn, error)) error {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	g, err := dial(dctx)
	cancel()
	if err != nil {
		c.Close()
		return err
	}
	if !conns.add(g) {
		g.Close()
		c.Close()
		return nil
	}
	defer conns.remove(g)
	Pipe(c, g)
	return nil
}
