package usernet

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/vmdock/vmdock/network/egress"
)

// A sandbox that may reach nothing still serves its published ports: the
// host agent dials the guest through the stack, and the guest's replies
// belong to that connection, not to a new flow of the guest's. Its own
// connection to the host's loopback (the gateway) is reset.
func TestEgressKeepsPublishedPortsAndRefusesTheGateway(t *testing.T) {
	policy, err := egress.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, Config{Egress: policy})
	guest := guestClient(t, s)
	ln, err := gonet.ListenTCP(guest, tcpip.FullAddress{NIC: 1, Port: 8080}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr, err := s.Direct().OpenPort(ctx, 8080)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Direct().DialDirect(ctx, addr)
	if err != nil {
		t.Fatalf("a published port of a sandbox: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo through the published port: %q, %v", buf, err)
	}
	if _, err := dialFromGuest(ctx, guest, GatewayIP, 22); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("the guest's connection to the gateway: %v; want refused", err)
	}
}
