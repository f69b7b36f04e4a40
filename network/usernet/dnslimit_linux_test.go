package usernet

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Queries past the cap of DNS in flight are dropped before they reach the
// host's resolver: with a resolver that never answers (the test's own
// socket on loopback, the only nameserver in the test's resolv.conf), 10
// lookups at once take 4 slots, the resolver sees only those 4 names, and
// the slots come back when the lookups time out.
func TestDNSInFlightCap(t *testing.T) {
	if !inNamespaces(t, mountNS, "dnsmasq") {
		return
	}
	dir := t.TempDir()
	bindOver(t, dir, "/etc/resolv.conf", "nameserver 127.0.0.204\noptions timeout:2 attempts:1\n")
	bindOver(t, dir, "/etc/hosts", "127.0.0.1 localhost\n")
	asked := silentResolver(t, "127.0.0.204:53")
	var log lockedBuffer
	s := newStack(t, Config{Limits: Limits{DNSInFlight: 4}, Log: slog.New(slog.NewTextHandler(&log, nil))})
	guest := guestClient(t, s)

	for i := range 10 {
		go func() { _, _ = query(guest, GatewayIP, fmt.Sprintf("name%d.corp.test.", i), time.Second) }()
	}
	waitFor(t, "10 queries to be taken in or dropped", func() bool {
		st := s.Stats()
		return st.DNSInFlight == 4 && st.DNSDropped == 6
	})
	if names := asked(); len(names) > 4 {
		t.Errorf("the host's resolver was asked for %d names (%v), want at most the 4 in flight", len(names), names)
	}
	waitFor(t, "the lookups to time out", func() bool { return s.Stats().DNSInFlight == 0 })
	if n := strings.Count(log.String(), "cap of DNS queries in flight"); n != 1 {
		t.Errorf("the cap logged %d times, want once:\n%s", n, log.String())
	}
}

// silentResolver reads DNS queries on addr and never answers; asked
// returns the names it was asked for.
func silentResolver(t *testing.T, addr string) (asked func() []string) {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var mu sync.Mutex
	names := map[string]bool{}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var m dns.Msg
			if m.Unpack(buf[:n]) == nil && len(m.Question) > 0 {
				mu.Lock()
				names[strings.TrimSuffix(m.Question[0].Name, ".")] = true
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for n := range names {
			out = append(out, n)
		}
		return out
	}
}
