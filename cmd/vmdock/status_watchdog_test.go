package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/control"
)

// status prints one line of the network paths' health with the last repair.
func TestStatusShowsNetworkPaths(t *testing.T) {
	var out bytes.Buffer
	writeHostAgentLines(&out, &control.Status{PID: 7, Phase: control.PhaseRunning, Watchdog: &control.WatchdogStatus{
		Paths:      []control.PathHealth{{Path: "ports", OK: true}, {Path: "dns", Problem: "stopped"}},
		LastRepair: &control.WatchdogRepair{At: "not a time", Path: "ports", What: "tcp 127.0.0.1:8080 bound again"},
	}})
	want := "network paths:\tports ok, dns BROKEN (stopped); last repair not a time ports: tcp 127.0.0.1:8080 bound again"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("status text:\n%s\nwant a line %q", out.String(), want)
	}
}
