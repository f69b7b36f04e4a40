package guest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/internal/connpipe"
)

func (s *Server) dial(ctx context.Context, st net.Conn, req agent.Request) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := d.DialContext(dctx, req.Network, req.Address)
	cancel()
	if err != nil {
		_ = agent.Reply(st, fmt.Errorf("dial %s %s: %w", req.Network, req.Address, err))
		st.Close()
		return
	}
	if err := agent.Reply(st, nil); err != nil {
		c.Close()
		st.Close()
		return
	}
	if strings.HasPrefix(req.Network, "udp") {
		proxyDatagrams(agent.NewDatagramConn(st), c)
		return
	}
	connpipe.Pipe(connpipe.CloseIsCloseWrite(st), c)
}

// proxyDatagrams copies whole datagrams between a stream and a udp socket.
// A udp socket never sees an end, so the stream's end ends both.
func proxyDatagrams(st *agent.DatagramConn, c net.Conn) {
	defer st.Close()
	defer c.Close()
	go func() {
		buf := make([]byte, agent.MaxDatagram)
		for {
			n, err := c.Read(buf)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					st.Close()
				}
				return
			}
			if _, err := st.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, agent.MaxDatagram)
	for {
		n, err := st.Read(buf)
		if err != nil {
			return
		}
		// A refused datagram (ICMP unreachable) is normal for UDP; keep going.
		_, _ = c.Write(buf[:n])
	}
}
