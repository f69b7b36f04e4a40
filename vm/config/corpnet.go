package config

import "strings"

// validateCorpNet checks the CA files' names and the proxy URLs; the files
// themselves are read (and checked) at start, where a missing one is
// reported by name.
func (c Config) validateCorpNet() []error {
	var p problems
	for _, f := range c.CACerts {
		if strings.TrimSpace(f) == "" || strings.ContainsAny(f, "\n\x00") {
			p.bad("caCerts", f, "paths of PEM files (~ expands)")
		}
	}
	if err := c.Proxy.Validate(); err != nil {
		p = append(p, err)
	}
	return p
}
