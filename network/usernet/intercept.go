package usernet

import (
	"context"
	"net"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// httpsPort is where a sandbox's secrets are injected.
const httpsPort = 443

// interceptTLS hands the guest's connection to target (port 443 of an
// address the sandbox may reach) to the secret proxy, which adds a
// secret's credential to requests for its host and relays any other TLS
// as it is. The guest's handshake completes before the host dials: the
// proxy decides by the server name the guest sends first.
func (s *Stack) interceptTLS(r *tcp.ForwarderRequest, target string) {
	var wq waiter.Queue
	ep, tcpErr := r.CreateEndpoint(&wq)
	r.Complete(false)
	if tcpErr != nil {
		return
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		var d net.Dialer
		return d.DialContext(ctx, "tcp", target)
	}
	s.cfg.Secrets.Handle(gonet.NewTCPConn(&wq, ep), target, dial)
}
