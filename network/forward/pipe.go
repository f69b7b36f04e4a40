package forward

import (
	"context"
	"net"
	"time"

	"github.com/vmdock/vmdock/internal/connpipe"
)

// dialAndPipe connects c to a new guest connection and pipes the two until
// both ends are done. Both stay in conns meanwhile, so a forwarder's Close
// ends them; a forwarder that is closing refuses the new guest conn.
func dialAndPipe(ctx context.Context, c net.Conn, conns *connSet, timeout time.Duration, hold Hold, dial func(ctx context.Context) (net.Conn, error)) error {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	release, err := hold.take(dctx)
	if err != nil {
		cancel()
		c.Close()
		return err
	}
	defer release()
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
	connpipe.Pipe(c, g)
	return nil
}

// Hold marks a connection as a use of the VM for as long as it is open,
// and wakes a VM paused while idle before the connection is dialled
// (vm/idle). release ends the use; an error refuses the connection.
type Hold func(ctx context.Context) (release func(), err error)

// take runs h, or nothing when there is none.
func (h Hold) take(ctx context.Context) (func(), error) {
	if h == nil {
		return func() {}, nil
	}
	return h(ctx)
}
