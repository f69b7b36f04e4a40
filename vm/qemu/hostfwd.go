package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/vmdock/vmdock/network/forward"
)

// netdevID names the user-mode network device, for hostfwd rules.
const netdevID = "net0"

var _ forward.DirectPath = (*Machine)(nil)

// OpenPort adds a user-networking hostfwd rule from an ephemeral host
// loopback port to guestPort on the guest's network address, at run time
// (HMP hostfwd_add through QMP). It works under restrict=on too: the rule
// is the host reaching in, not the guest reaching out. The host agent's
// own listener stays in front of it, so the bind address, busy-port
// handling and status are unchanged; only the data path skips the guest
// agent.
func (m *Machine) OpenPort(ctx context.Context, guestPort int) (string, error) {
	if guestPort < 1 || guestPort > 65535 {
		return "", fmt.Errorf("guest port %d: accepted: 1-65535", guestPort)
	}
	if m.exited() {
		return "", errors.New("open port: the VM is not running")
	}
	var lastErr error
	for range 3 { // the free port may be taken between the probe and the rule
		hostPort, err := freeLoopbackPort()
		if err != nil {
			return "", err
		}
		rule := fmt.Sprintf("tcp:127.0.0.1:%d-:%d", hostPort, guestPort)
		if lastErr = m.hmp(ctx, "hostfwd_add "+netdevID+" "+rule); lastErr == nil {
			m.mu.Lock()
			if m.hostfwds == nil {
				m.hostfwds = map[int]int{}
			}
			if old, ok := m.hostfwds[guestPort]; ok {
				defer m.removeHostfwd(context.Background(), old)
			}
			m.hostfwds[guestPort] = hostPort
			m.mu.Unlock()
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort)), nil
		}
	}
	return "", fmt.Errorf("hostfwd for guest port %d: %w", guestPort, lastErr)
}

// Handshakes is one. QEMU's user networking listens with a backlog of 1:
// when several handshakes are pending, the host kernel answers the rest
// with SYN cookies, and a client that sends more than one segment before
// QEMU accepts gets its later segments refused by the cookie check and the
// connection reset (measured here: 15 of 100 parallel 1 MiB streams reset,
// the host's SyncookiesFailed counter 15). One handshake in flight keeps
// the queue at one entry.
func (m *Machine) Handshakes() int { return 1 }

// ClosePort removes the hostfwd rule OpenPort added for guestPort.
func (m *Machine) ClosePort(ctx context.Context, guestPort int) error {
	m.mu.Lock()
	hostPort, ok := m.hostfwds[guestPort]
	delete(m.hostfwds, guestPort)
	m.mu.Unlock()
	if !ok || m.exited() {
		return nil
	}
	return m.removeHostfwd(ctx, hostPort)
}

func (m *Machine) removeHostfwd(ctx context.Context, hostPort int) error {
	// Success prints "host forwarding rule for ... removed".
	return m.hmp(ctx, fmt.Sprintf("hostfwd_remove %s tcp:127.0.0.1:%d", netdevID, hostPort), "removed")
}

// hmp runs a human monitor command. HMP reports failure only as text: any
// output that does not contain okText (empty: no output at all) is one.
func (m *Machine) hmp(ctx context.Context, cmd string, okText ...string) error {
	var out string
	if err := m.qmp.execute(ctx, "human-monitor-command", map[string]any{"command-line": cmd}, &out); err != nil {
		return err
	}
	out = strings.TrimSpace(out)
	if out == "" || len(okText) > 0 && strings.Contains(out, okText[0]) {
		return nil
	}
	return fmt.Errorf("qemu: %s", out)
}

// freeLoopbackPort asks the kernel for a free port on 127.0.0.1.
func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
