package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/instance"
)

// status lists every host address that serves a port, and a port served
// on one loopback family only says which address it misses and why.
func TestStatusShowsEveryHostAddressOfAPort(t *testing.T) {
	ports := []control.ForwardedPort{
		{Proto: "tcp", GuestPort: 80, HostAddr: "127.0.0.1:8080", HostAddrs: []string{"127.0.0.1:8080", "[::1]:8080"}, Path: "direct"},
		{Proto: "tcp", GuestPort: 81, HostAddr: "127.0.0.1:8081", HostAddrs: []string{"[::1]:8081"}, Path: "tunnel",
			Warning: "listen on 127.0.0.1:8081/tcp: port already in use on the host"},
		{Proto: "tcp", GuestPort: 82, HostAddr: "127.0.0.1:82", Path: "tunnel", Error: "listen on 127.0.0.1:82/tcp: port is privileged"},
		// A host agent from before hostAddrs: the bind address alone.
		{Proto: "udp", GuestPort: 53, HostAddr: "127.0.0.1:5353", Path: "tunnel"},
	}
	s := statusJSON{Profile: "default", Status: instance.StateRunning, HostAgent: &control.Status{Ports: ports}}
	var out bytes.Buffer
	if err := writeStatusText(&out, s, instance.LiveStatus{State: instance.StateRunning}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "port:") {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		"port: tcp/80 -> 127.0.0.1:8080, [::1]:8080 (direct)",
		"port: tcp/81 -> [::1]:8081 (tunnel; not on every address: listen on 127.0.0.1:8081/tcp: port already in use on the host)",
		"port: tcp/82 -> 127.0.0.1:82 (listen on 127.0.0.1:82/tcp: port is privileged)",
		"port: udp/53 -> 127.0.0.1:5353 (tunnel)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("status ports:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	var js bytes.Buffer
	if err := writeJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"hostAddrs": [`, `"[::1]:8080"`, `"warning": "listen on 127.0.0.1:8081/tcp`} {
		if !strings.Contains(js.String(), field) {
			t.Errorf("status --json lacks %s:\n%s", field, js.String())
		}
	}
	var back statusJSON
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.HostAgent.Ports[1].Warning == "" {
		t.Errorf("status --json does not round-trip the warning: %v", err)
	}
}
