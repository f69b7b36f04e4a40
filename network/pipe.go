package network

import (
	"context"
	"net"
	"time"

	"github.com/vmdock/vmdock/connpipe"
)

// Pipe copies a<->b until both directions end, passing each end-of-stream
// on as a half-close; it closes both conns before it returns. It is
// connpipe.Pipe, which the guest agent shares.
func Pipe(a, b net.Conn) { connpipe.Pipe(a, b) }

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
