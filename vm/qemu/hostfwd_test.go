package qemu

import (
	"context"
	"net"
	"testing"
	"time"
)

// hostfwd rules come and go at run time on a real qemu, also under
// restrict=on: the host side listens while the rule exists.
func TestOpenAndClosePort(t *testing.T) {
	needQEMU(t)
	dir := shortDir(t)
	m := startPaused(t, savableSpec(t, dir))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, err := m.OpenPort(ctx, 80)
	if err != nil {
		t.Fatalf("OpenPort: %v", err)
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("nothing listens at %s after OpenPort: %v", addr, err)
	}
	c.Close()
	if err := m.ClosePort(ctx, 80); err != nil {
		t.Fatalf("ClosePort: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still listens after ClosePort", addr)
	}
	if _, err := m.OpenPort(ctx, 70000); err == nil {
		t.Error("OpenPort accepted port 70000")
	}
}
