package config

import (
	"strings"
	"testing"
)

func TestDomainsDefaultsAndValidation(t *testing.T) {
	c, err := Parse([]byte("domains:\n  httpPort: 8080\n"), linuxHost)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Domains.Enabled || c.Domains.HTTPPort != 8080 || c.Domains.HTTPSPort != 443 || c.Domains.DNSPort != 15353 {
		t.Errorf("domains %+v, want enabled, 8080, 443, DNS 15353", c.Domains)
	}
	if errs := c.Domains.validate(); len(errs) != 0 {
		t.Errorf("valid domains refused: %v", errs)
	}
	if c, _ := Parse([]byte("domains:\n  enabled: false\n"), linuxHost); c.Domains.Enabled {
		t.Error("enabled: false did not turn domains off")
	}
	for yaml, want := range map[string]string{
		"domains:\n  httpPort: 0\n":                     "domains.httpPort: 0 is not accepted; accepted: a port 1-65535",
		"domains:\n  httpsPort: 70000\n":                "domains.httpsPort: 70000 is not accepted",
		"domains:\n  httpPort: 8080\n  httpsPort: 8080": "a port other than domains.httpPort (8080)",
	} {
		c, err := Parse([]byte(yaml), linuxHost)
		if err != nil {
			t.Fatal(err)
		}
		// ValidateOn runs this section too; it is called alone here
		// because the default mounts need a real home folder
		errs := c.Domains.validate()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("%q: %v, want %q", yaml, errs, want)
		}
	}
}
