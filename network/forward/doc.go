// Package forward moves bytes between the host and the guest: a unix
// socket forwarder (the docker socket), a port forwarder that mirrors the
// guest's listening ports on the host, the port rules that shape it, and
// the datagram framing UDP uses on a stream. It never imports the agent:
// everything that reaches the guest goes through a DialFunc.
package forward

import (
	"context"
	"net"
)

// DialFunc opens a stream to network/addr as seen from the guest, e.g.
// ("unix", "/var/run/docker.sock") or ("tcp", "127.0.0.1:8080"). For "udp"
// the stream carries length-prefixed datagrams (see PacketStream).
//
// The returned conn should implement connpipe.CloseWriter: without it a half-close
// from the host client cannot be passed on to the guest.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)
