package hostagent

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/network/forward"
	"github.com/vmdock/vmdock/vm/driver"
)

// hostfwdMachine stands in for QEMU: a machine with its own direct path.
type hostfwdMachine struct{ *agentMachine }

func (hostfwdMachine) OpenPort(context.Context, int) (string, error) { return "127.0.0.1:1", nil }
func (hostfwdMachine) ClosePort(context.Context, int) error          { return nil }
func (hostfwdMachine) Handshakes() int                               { return 1 }

// natMachine stands in for vz: routable behind NAT, not when isolated.
type natMachine struct {
	*agentMachine
	nat bool
}

func (m natMachine) GuestRoutable() bool { return m.nat }

func TestDirectPathForEachMachine(t *testing.T) {
	addr := func(context.Context) (netip.Addr, error) { return netip.MustParseAddr("192.168.64.9"), nil }
	if d := directPathFor(hostfwdMachine{newAgentMachine()}, addr); d == nil || d.Handshakes() != 1 {
		t.Errorf("QEMU-like machine: %#v, want its own hostfwd path", d)
	}
	d := directPathFor(natMachine{newAgentMachine(), true}, addr)
	if _, ok := d.(forward.AddrPath); !ok {
		t.Fatalf("vz behind NAT: %#v, want an AddrPath", d)
	}
	if a, err := d.OpenPort(context.Background(), 80); err != nil || a != "192.168.64.9:80" {
		t.Errorf("vz behind NAT opens %q, %v", a, err)
	}
	if d := directPathFor(natMachine{newAgentMachine(), false}, addr); d != nil {
		t.Errorf("isolated vz: %#v, want no direct path (tunnel)", d)
	}
	if d := directPathFor(newAgentMachine(), addr); d != nil {
		t.Errorf("a machine with no network: %#v, want none", d)
	}
}

// The guest's address comes from the agent's Info, asked when a port
// opens: the first IPv4 one; none is an error (the port tunnels).
func TestAgentLinkGuestAddr(t *testing.T) {
	for _, c := range []struct {
		addrs []string
		want  string
	}{{[]string{"fe80::1", "192.168.64.7", "192.168.64.8"}, "192.168.64.7"}, {nil, ""}} {
		m := newAgentMachine()
		m.start(func(g net.Conn) {
			sess, ok := scriptedSession(g)
			if !ok {
				return
			}
			defer sess.Close()
			for {
				st, err := sess.AcceptStream()
				if err != nil {
					return
				}
				var req agent.Request
				agent.ReadJSONLine(st, &req)
				agent.WriteJSONLine(st, agent.Response{OK: true, Info: &agent.Info{Version: "test", Addrs: c.addrs}})
				st.Close()
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		client, _, err := agent.DialOnce(ctx, m.DialAgent, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		var link agentLink
		link.set(client)
		got, err := link.guestAddr(ctx)
		switch {
		case c.want == "" && (err == nil || !strings.Contains(err.Error(), "no address")):
			t.Errorf("no addresses: %v, %v; want an error", got, err)
		case c.want != "" && (err != nil || got.String() != c.want):
			t.Errorf("addresses %v: %v, %v; want %s", c.addrs, got, err, c.want)
		}
		client.Close()
		m.crash()
		cancel()
	}
}

var _ driver.RoutedGuest = natMachine{}
