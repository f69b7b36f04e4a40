package config

import (
	"strings"
	"testing"
)

func TestCorpNetFields(t *testing.T) {
	h := Host{OS: "linux", Arch: "amd64", CPUs: 4}
	c, err := Parse([]byte("mounts: []\ncaCerts: [/etc/corp/ca.pem]\nproxy:\n  https: http://proxy.corp:3128\n  noProxy: .corp\n"), h)
	if err != nil {
		t.Fatal(err)
	}
	if !c.HostCACerts || len(c.CACerts) != 1 || c.Proxy.HTTPS != "http://proxy.corp:3128" || c.Proxy.NoProxy != ".corp" {
		t.Fatalf("parsed %+v", c)
	}
	if err := c.ValidateOn(h); err != nil {
		t.Fatal(err)
	}
	off, _ := Parse([]byte("hostCACerts: false\n"), h)
	if off.HostCACerts {
		t.Errorf("hostCACerts: false ignored")
	}
	c.Proxy.HTTPS = "proxy.corp:3128"
	c.CACerts = []string{""}
	err = c.ValidateOn(h)
	if err == nil || !strings.Contains(err.Error(), "proxy.https") || !strings.Contains(err.Error(), "caCerts") {
		t.Errorf("bad proxy and empty CA path: %v", err)
	}
}
