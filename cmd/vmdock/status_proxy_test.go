package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/instance"
)

func TestStatusShowsProxyMasked(t *testing.T) {
	s := statusJSON{Profile: "default", Status: "Running", HostAgent: &control.Status{
		Proxy:   &control.ProxyStatus{HTTPS: "http://***@10.254.254.254:3128", NoProxy: "host.docker.internal", Source: "environment"},
		CACerts: 2,
	}}
	var text bytes.Buffer
	if err := writeStatusText(&text, s, instance.LiveStatus{State: "Running"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"https http://***@10.254.254.254:3128 (from the host's environment); not for host.docker.internal", "2 trusted"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, text.String())
		}
	}
	pac := proxyLine(&control.ProxyStatus{PAC: "http://wpad/proxy.pac"})
	if !strings.Contains(pac, "PAC file (http://wpad/proxy.pac), not applied") {
		t.Errorf("PAC: %q", pac)
	}
	if proxyLine(nil) != "" {
		t.Errorf("no proxy: want no line")
	}
}

// The config's proxy is in status --json's config: never its password.
func TestStatusJSONMasksTheConfigProxy(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, "default", "vmdock.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, []byte("proxy:\n  https: http://bob:hunter2@proxy.corp:3128\n")...)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(p, testHost); err != nil {
		t.Fatal(err)
	}
	out, _ := run("status", "--json")
	if strings.Contains(out, "hunter2") || strings.Contains(out, "bob") || !strings.Contains(out, `"https": "http://***@proxy.corp:3128"`) {
		t.Errorf("status --json:\n%s", out)
	}
}
