package corpnet

import (
	"context"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
)

func newTestServer(t *testing.T) (*CorpNet, *guestostest.FakeOS) {
	t.Helper()
	sys, fos := guestostest.NewSys(t)
	return &CorpNet{Sys: sys}, fos
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}
