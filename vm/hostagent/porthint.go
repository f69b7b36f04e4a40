package hostagent

import (
	"fmt"
	"net"
	"strconv"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
)

// notePortsTheRouterHolds adds, to a forwarded port that could not listen
// because its host port is one of the container-domains router's, who
// holds it and what to change: `docker run -p 80:80` is common, and
// "address already in use" alone points nowhere.
func notePortsTheRouterHolds(ports []control.ForwardedPort, d config.DomainsConfig) []control.ForwardedPort {
	if !d.Enabled {
		return ports
	}
	for i, p := range ports {
		_, portText, err := net.SplitHostPort(p.HostAddr)
		if err != nil {
			continue
		}
		port, _ := strconv.Atoi(portText)
		field := ""
		switch port {
		case d.HTTPPort:
			field = "httpPort"
		case d.HTTPSPort:
			field = "httpsPort"
		default:
			continue
		}
		hint := fmt.Sprintf("vmdock's container-domains router may hold port %d (domains.%s): set domains.%s to another port, or reach the container by its name under vmdock.localhost", port, field, field)
		if p.Error != "" {
			ports[i].Error = p.Error + "; " + hint
		} else if p.Warning != "" {
			ports[i].Warning = p.Warning + "; " + hint
		}
	}
	return ports
}
