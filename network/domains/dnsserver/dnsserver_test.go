package dnsserver

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"
)

func TestResolverAnswersOnlyVmdockLocalhost(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(pc) }()
	// Go's own resolver, pointed at the responder, as the system's would be
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range []string{"web.vmdock.localhost", "API.Shop.Dev.vmdock.localhost", "vmdock.localhost"} {
		ips, err := r.LookupHost(ctx, name)
		slices.Sort(ips)
		if err != nil || !slices.Equal(ips, []string{"127.0.0.1", "::1"}) {
			t.Errorf("%s: %v %v, want 127.0.0.1 and ::1", name, ips, err)
		}
	}
	if mx, err := r.LookupMX(ctx, "web.vmdock.localhost"); err == nil && len(mx) != 0 {
		t.Errorf("MX for a container name: %v", mx)
	}
	for _, name := range []string{"example.com", "evilvmdock.localhost"} {
		if ips, err := r.LookupHost(ctx, name); err == nil {
			t.Errorf("%s answered %v; want refused", name, ips)
		}
	}
	pc.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve after close: %v", err)
	}
}

func TestAnswerIgnoresGarbageAndResponses(t *testing.T) {
	if _, ok := Answer([]byte{1, 2, 3}); ok {
		t.Error("answered garbage")
	}
	q, ok := Answer(query(t))
	if !ok || q[0] != 0x12 || q[1] != 0x34 || q[2]&0x80 == 0 {
		t.Fatalf("the query got %x, %v; want a response with id 1234", q, ok)
	}
	if _, ok := Answer(q); ok {
		t.Error("answered a response (a loop between two responders)")
	}
}

func query(t *testing.T) []byte {
	t.Helper()
	// a minimal A query for web.vmdock.localhost, id 0x1234, RD set
	q := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range []string{"web", "vmdock", "localhost"} {
		q = append(q, byte(len(l)))
		q = append(q, l...)
	}
	return append(q, 0, 0, 1, 0, 1)
}
