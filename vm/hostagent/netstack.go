package hostagent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"

	"github.com/vmdock/vmdock/network/forward"
	"github.com/vmdock/vmdock/network/usernet"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
)

// usernetRun is the host agent's own network for the VM (network.stack:
// gvisor): the stack, and the VM's end of the socket pair it serves,
// which stays open while the VM may use it (vz keeps using the handle it
// was given).
type usernetRun struct {
	stack  *usernet.Stack
	vmEnd  *os.File
	cancel context.CancelFunc
}

// Socket buffers of the datagram pair vz's NIC uses: one frame per
// datagram, and a burst of them must not be dropped for want of room.
const (
	netDgramSendBuf = 1 << 20
	netDgramRecvBuf = 4 << 20
)

// withNetStack starts the stack when the spec asks for it and returns plan
// with the VM's end of its socket; any other plan is returned as is.
func (ha *hostAgent) withNetStack(plan driver.Plan) (driver.Plan, error) {
	spec := plan.Spec()
	if spec.NetStack != driver.NetStackGvisor {
		return plan, nil
	}
	ha.closeNetStack() // a cold boot after a failed resume starts afresh
	policy, err := ha.egressPolicy()
	if err != nil {
		return plan, err
	}
	secrets, err := ha.secretProxy()
	if err != nil {
		return plan, err
	}
	s, err := usernet.New(usernet.Config{Isolated: spec.Network == driver.NetworkIsolated, Log: slog.Default().With("component", "usernet"), Egress: policy, Secrets: secrets})
	if err != nil {
		return plan, err
	}
	sockType, serve := syscall.SOCK_STREAM, s.ServeQEMU
	if ha.boot.driver.Name() == driver.TypeVZ {
		sockType, serve = syscall.SOCK_DGRAM, s.ServeVfkit
	}
	hostEnd, vmEnd, err := socketPair(sockType)
	if err != nil {
		s.Close()
		return plan, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := serve(ctx, hostEnd); err != nil {
			slog.Warn("the VM's network stack stopped serving its NIC", "err", err)
		}
	}()
	ha.mu.Lock()
	ha.run.net = &usernetRun{stack: s, vmEnd: vmEnd, cancel: cancel}
	ha.mu.Unlock()
	return plan.WithNetFile(vmEnd), nil
}

// closeNetStack ends the stack, if one runs.
func (ha *hostAgent) closeNetStack() {
	ha.mu.Lock()
	n := ha.run.net
	ha.run.net = nil
	ha.mu.Unlock()
	if n == nil {
		return
	}
	n.cancel()
	n.stack.Close()
	n.vmEnd.Close()
}

// netStackDirect is the stack's direct path to published ports, in
// place of the machine's (qemu's hostfwd needs slirp); nil when no stack
// runs. Called with ha.mu held.
func (ha *hostAgent) netStackDirect() forward.DirectPath {
	if ha.run.net == nil {
		return nil
	}
	return ha.run.net.stack.Direct()
}

// netStackRelays is the stack's relays for status; nil when no stack
// runs. Called with ha.mu held.
func (ha *hostAgent) netStackRelays() *control.NetRelays {
	if ha.run.net == nil {
		return nil
	}
	st := ha.run.net.stack.Stats()
	return &control.NetRelays{
		UDPFlows: st.UDPFlows, TCP: st.TCPRelays, DNSInFlight: st.DNSInFlight, PendingDials: st.PendingDials,
		Caps: map[string]int{
			"udpFlows": st.Limits.UDPFlows, "tcp": st.Limits.TCPRelays,
			"dnsInFlight": st.Limits.DNSInFlight, "pendingDialsPerDest": st.Limits.PendingDialsPerDest,
		},
		Dropped: control.NetDropped{
			UDPEvicted: st.UDPEvicted, TCPRefused: st.TCPRefused, DNSDropped: st.DNSDropped,
			DialsDeferred: st.DialsDeferred, MalformedFrames: st.MalformedFrames, Panics: st.Panics,
		},
	}
}

// socketPair is a connected unix socket pair: the host agent's end as a
// net.Conn, the VM's as a file for the hypervisor.
func socketPair(sockType int) (net.Conn, *os.File, error) {
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, sockType, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("network stack socket pair: %w", err)
	}
	if sockType == syscall.SOCK_DGRAM {
		for _, fd := range fds {
			_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, netDgramSendBuf)
			_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, netDgramRecvBuf)
		}
	}
	hostFile := os.NewFile(uintptr(fds[0]), "usernet-host")
	defer hostFile.Close()
	hostEnd, err := net.FileConn(hostFile)
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("network stack socket: %w", err)
	}
	return hostEnd, os.NewFile(uintptr(fds[1]), "usernet-vm"), nil
}
