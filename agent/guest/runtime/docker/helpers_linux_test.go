package docker

import (
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func newTestServer(t *testing.T) (*Engine, *guestostest.FakeOS) {
	t.Helper()
	sys, fos := guestostest.NewSys(t)
	return &Engine{Sys: sys}, fos
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
