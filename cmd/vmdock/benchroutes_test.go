package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/bench/scratch"
	"github.com/vmdock/vmdock/vm/driver"
)

// scratchVM is a running machine that takes scratch disks, as QEMU's does.
type scratchVM struct{ attached []int }

func (*scratchVM) DialAgent(context.Context) (net.Conn, error) { return nil, nil }
func (*scratchVM) Stop(context.Context, bool) error            { return nil }
func (*scratchVM) Wait() error                                 { return nil }
func (*scratchVM) Info() driver.MachineInfo                    { return driver.MachineInfo{Driver: "fake"} }
func (m *scratchVM) AttachScratch(_ context.Context, slot int, _ string) (string, error) {
	m.attached = append(m.attached, slot)
	return "vmdock-scratch", nil
}
func (*scratchVM) DetachScratch(context.Context, int) error { return nil }

// The command line gives the host agent the bench's scratch route
// (hostagent.Options.Routes); `vmdock bench`'s client reaches the running
// machine through it, and is told when none runs.
func TestBenchRoutesServeScratch(t *testing.T) {
	var running driver.Machine
	mux := http.NewServeMux()
	for pattern, h := range benchRoutes(func() driver.Machine { return running }) {
		mux.Handle(pattern, h)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := scratch.Client{HTTP: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
		},
	}}}

	if _, err := c.Attach(t.Context(), 1, "none"); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("attach with no VM: %v; want the VM is not running", err)
	}
	vm := &scratchVM{}
	running = vm
	if serial, err := c.Attach(t.Context(), 2, "none"); err != nil || serial != "vmdock-scratch" || len(vm.attached) != 1 || vm.attached[0] != 2 {
		t.Fatalf("attach: %q, %v, slots %v", serial, err, vm.attached)
	}
}
