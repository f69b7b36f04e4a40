package config

// DomainsConfig is the host-side router for http(s)://<name>.vmdock.localhost:
// whether this profile's containers get names, and the loopback
// ports the router listens on.
type DomainsConfig struct {
	Enabled   bool `yaml:"enabled" json:"enabled"`
	HTTPPort  int  `yaml:"httpPort" json:"httpPort"`
	HTTPSPort int  `yaml:"httpsPort" json:"httpsPort"`
	// DNSPort is the loopback UDP port of the responder that answers
	// *.vmdock.localhost for the system resolver (`vmdock domains
	// resolver add`); 0: none.
	DNSPort int `yaml:"dnsPort" json:"dnsPort"`
}

const (
	DefaultDomainsHTTPPort  = 80
	DefaultDomainsHTTPSPort = 443
	DefaultDomainsDNSPort   = 15353
)

// DefaultDomains is on, on the standard ports, so URLs need no port where
// the OS lets vmdock bind them.
func DefaultDomains() DomainsConfig {
	return DomainsConfig{Enabled: true, HTTPPort: DefaultDomainsHTTPPort, HTTPSPort: DefaultDomainsHTTPSPort, DNSPort: DefaultDomainsDNSPort}
}

func (d DomainsConfig) validate() []error {
	var p problems
	if d.HTTPPort < 1 || d.HTTPPort > 65535 {
		p.bad("domains.httpPort", d.HTTPPort, "a port 1-65535")
	}
	if d.HTTPSPort < 1 || d.HTTPSPort > 65535 {
		p.bad("domains.httpsPort", d.HTTPSPort, "a port 1-65535")
	} else if d.HTTPSPort == d.HTTPPort {
		p.bad("domains.httpsPort", d.HTTPSPort, "a port other than domains.httpPort (%d)", d.HTTPPort)
	}
	if d.DNSPort < 0 || d.DNSPort > 65535 {
		p.bad("domains.dnsPort", d.DNSPort, "a port 1-65535, or 0 for no DNS responder")
	}
	return p
}
