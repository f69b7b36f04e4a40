package binfmt

import (
	"testing"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func newTestServer(t *testing.T) (*Handlers, *guestostest.FakeOS) {
	t.Helper()
	sys, fos := guestostest.NewSys(t)
	return &Handlers{Sys: sys}, fos
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
