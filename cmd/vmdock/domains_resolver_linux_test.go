package main

import (
	"strings"
	"testing"
)

func TestDomainsResolverOnLinuxExplains(t *testing.T) {
	env(t)
	out, err := run("domains", "resolver", "add")
	if err == nil || !strings.Contains(err.Error(), "systemd-resolved") {
		t.Errorf("resolver add on Linux: %v\n%s", err, out)
	}
}
