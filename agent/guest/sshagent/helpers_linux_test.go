package sshagent

import (
	"errors"
	"net"
	"testing"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func newTestServer(t *testing.T) (*Relay, *guestostest.FakeOS) {
	t.Helper()
	sys, fos := guestostest.NewSys(t)
	// Without a host, as the server without a session.
	noHost := func(agent.Request) (net.Conn, error) { return nil, errors.New("no host session") }
	return &Relay{Sys: sys, OpenToHost: noHost}, fos
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
