package hostagent

import (
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
)

// A published port that clashes with the router's ports says so; other
// ports, served ports and a config without domains are left alone.
func TestPortsTheRouterHoldsAreNamed(t *testing.T) {
	d := config.DomainsConfig{Enabled: true, HTTPPort: 80, HTTPSPort: 443}
	ports := []control.ForwardedPort{
		{Proto: "tcp", GuestPort: 80, HostAddr: "127.0.0.1:80", Error: "listen tcp 127.0.0.1:80: bind: address already in use"},
		{Proto: "tcp", GuestPort: 8443, HostAddr: "127.0.0.1:443", Warning: "not on [::1]:443: address already in use"},
		{Proto: "tcp", GuestPort: 81, HostAddr: "127.0.0.1:8081", Error: "listen tcp 127.0.0.1:8081: bind: address already in use"},
		{Proto: "tcp", GuestPort: 80, HostAddr: "127.0.0.1:80"},
	}
	got := notePortsTheRouterHolds(append([]control.ForwardedPort(nil), ports...), d)
	if !strings.HasSuffix(got[0].Error, "router may hold port 80 (domains.httpPort): set domains.httpPort to another port, or reach the container by its name under vmdock.localhost") {
		t.Errorf("port 80: %q", got[0].Error)
	}
	if !strings.Contains(got[1].Warning, "(domains.httpsPort)") {
		t.Errorf("port 443: %q", got[1].Warning)
	}
	if got[2].Error != ports[2].Error || got[3].Error != "" || got[3].Warning != "" {
		t.Errorf("other ports changed: %+v %+v", got[2], got[3])
	}
	d.Enabled = false
	if off := notePortsTheRouterHolds(append([]control.ForwardedPort(nil), ports...), d); off[0].Error != ports[0].Error {
		t.Errorf("domains off: %q", off[0].Error)
	}
}
