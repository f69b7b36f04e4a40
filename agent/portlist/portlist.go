// Package portlist lists the guest's listening sockets that a user means to
// publish: listening TCP and bound, unconnected UDP on the any address or
// exactly localhost, IPv4 and IPv6.
//
// Two sources give the same answer. SockDiag asks the kernel over netlink
// and lets it filter by socket state, so its cost does not grow with the
// guest's established connections. ProcNet parses /proc/net/{tcp,udp}{,6},
// which prints every socket as text; it stays as the fallback for kernels
// without the inet_diag modules, and as the baseline `vmdock bench` measures
// SockDiag against.
//
// OwnedBy names which of those sockets given processes hold (by inode, from
// /proc), so the guest's own daemons' listeners can be left out.
package portlist

import (
	"errors"
	"net/netip"
	"sort"
)

// Port is one forwardable socket.
type Port struct {
	Proto string // "tcp" or "udp"
	IP    netip.Addr
	Port  int
}

// ErrNoSockDiag means this kernel or OS cannot answer sock_diag requests;
// ProcNet still works there.
var ErrNoSockDiag = errors.New("sock_diag not supported")

var localhost4 = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// forwardable keeps only what a user means to publish: all addresses, or
// exactly localhost. 127.0.0.53 (systemd-resolved's stub) and other
// loopback aliases are the guest's private business, and forwarding them
// would take ports such as 53 on the host.
func forwardable(ip netip.Addr, port int) bool {
	return port != 0 && (ip.IsUnspecified() || ip == localhost4 || ip == netip.IPv6Loopback())
}

// Linux socket states (include/net/tcp_states.h): a listening TCP socket,
// and TCP_CLOSE, which a bound unconnected UDP socket reports.
const (
	stateListen = 10
	stateClose  = 7
)

// sortPorts gives both sources one stable order.
func sortPorts(ps []Port) {
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return a.IP.Less(b.IP)
	})
}
