package main

import (
	"strings"

	"github.com/vmdock/vmdock/vm/control"
)

// proxyLine is the proxy in effect for `status`, credentials already
// masked by the host agent; "" when there is none and no PAC to mention.
func proxyLine(p *control.ProxyStatus) string {
	if p == nil {
		return ""
	}
	var parts []string
	if p.HTTP != "" {
		parts = append(parts, "http "+p.HTTP)
	}
	if p.HTTPS != "" {
		parts = append(parts, "https "+p.HTTPS)
	}
	line := strings.Join(parts, ", ")
	if line != "" {
		line += " (from the host's " + p.Source + ")"
		if p.NoProxy != "" {
			line += "; not for " + p.NoProxy
		}
	}
	if p.PAC != "" {
		if line != "" {
			line += "; "
		}
		line += "the host's system settings use a PAC file (" + p.PAC + "), not applied: set proxy: in the config"
	}
	return line
}
