package hostagent

import (
	"context"
	"io"
	"net"
	"path/filepath"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/network/domains/nerdctlapi"
	"github.com/vmdock/vmdock/network/domains/sharedrouter"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"
)

// stepDomains serves http(s)://<name>.vmdock.localhost for this profile's
// containers (network/domains/sharedrouter). Nothing here fails the start: what
// cannot run is a note.
func (ha *hostAgent) stepDomains(context.Context) error {
	if !ha.cfg.Domains.Enabled {
		return nil
	}
	note := func(s string) { ha.events.Emit("domains", control.EventNote, "", s) }
	var names sharedrouter.NameSource
	switch ha.cfg.Runtime {
	case config.RuntimeDocker:
	case config.RuntimeContainerd:
		// nerdctl in the guest: the containers' addresses are in their
		// network namespaces, which only the guest sees
		names = nerdctlapi.New(ha.guestExec)
	default:
		note("container domains: names for the " + ha.cfg.Runtime + " runtime are not built yet")
		return nil
	}
	d, err := sharedrouter.Start(sharedrouter.Settings{
		Profile: ha.inst.Name,
		Home:    filepath.Dir(ha.inst.Dir),
		Ports:   sharedrouter.Ports{HTTPPort: ha.cfg.Domains.HTTPPort, HTTPSPort: ha.cfg.Domains.HTTPSPort, DNSPort: ha.cfg.Domains.DNSPort},
		Binds:   []string{"127.0.0.1", "::1"},
		Dial:    ha.session.link.Dial,
		Names:   names,
		Docker: func(ctx context.Context) (net.Conn, error) {
			return ha.session.link.Dial(ctx, "unix", guestDockerSocket)
		},
		Hold:         ha.hold,
		ValidProfile: store.ValidateProfile,
		Note:         note,
	})
	if err != nil {
		note("container domains are off: " + err.Error())
		return nil
	}
	ha.domains.Store(d)
	return nil
}

// guestExec runs a command in the guest for the names (nerdctlapi.Exec):
// no hold, so following events keeps no VM awake; a command waits out a
// reconnect before it starts, and ends with the session it ran on.
func (ha *hostAgent) guestExec(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error) {
	c, err := ha.session.link.live(ctx)
	if err != nil {
		return -1, err
	}
	return c.Exec(ctx, agent.ExecRequest{Argv: argv}, nil, stdout, stderr, nil)
}

func (ha *hostAgent) undoDomains(context.Context) error {
	if d := ha.domains.Swap(nil); d != nil {
		d.Close()
	}
	return nil
}

// yieldToPublished is the port forwarder's Yield: a port the user
// publishes wins over the container-domains router.
func (ha *hostAgent) yieldToPublished(port int) (giveBack func()) {
	if d := ha.domains.Load(); d != nil {
		return d.Yield(port)
	}
	return nil
}
