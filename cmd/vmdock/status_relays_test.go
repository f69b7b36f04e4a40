package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/instance"
)

// status shows the guest's relays through the user-mode stack against
// their caps, and what the caps turned away once anything was.
func TestStatusShowsNetworkRelays(t *testing.T) {
	caps := map[string]int{"udpFlows": 1024, "tcp": 2048, "dnsInFlight": 256, "pendingDialsPerDest": 16}
	for _, tc := range []struct {
		name   string
		relays control.NetRelays
		want   string
	}{
		{"quiet", control.NetRelays{UDPFlows: 3, TCP: 12, DNSInFlight: 1, Caps: caps},
			"relays: 3/1024 UDP flows, 12/2048 TCP, 1/256 DNS in flight, 0 dials pending"},
		{"capped", control.NetRelays{UDPFlows: 1024, TCP: 2048, PendingDials: 16, Caps: caps,
			Dropped: control.NetDropped{UDPEvicted: 40, TCPRefused: 2, DialsDeferred: 7, MalformedFrames: 1}},
			"relays: 1024/1024 UDP flows, 2048/2048 TCP, 0/256 DNS in flight, 16 dials pending; since the VM started: " +
				"40 UDP flows evicted, 2 TCP connections refused, 7 SYNs to a stuck destination dropped, 1 malformed frames dropped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &control.Status{Network: &control.NetworkStatus{Stack: "gvisor", Mode: "user", Relays: &tc.relays}}
			var out bytes.Buffer
			if err := writeStatusText(&out, statusJSON{Profile: "default", Status: instance.StateRunning, HostAgent: h}, instance.LiveStatus{State: instance.StateRunning}); err != nil {
				t.Fatal(err)
			}
			var got string
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(l, "relays:") {
					got = strings.Join(strings.Fields(l), " ")
				}
			}
			if got != tc.want {
				t.Errorf("status line:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
