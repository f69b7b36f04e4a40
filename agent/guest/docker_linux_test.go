package guest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDaemonJSONDNS(t *testing.T) {
	readDNS := func(t *testing.T, s *Server) any {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(s.Root, daemonJSON))
		must(t, err)
		var cfg map[string]any
		must(t, json.Unmarshal(b, &cfg))
		return cfg["dns"]
	}
	s, _ := newTestServer(t)
	s.hostAccessIP = "10.254.254.254"
	must(t, os.MkdirAll(filepath.Join(s.Root, "etc/docker"), 0o755))

	// No server: a user's own dns is kept.
	must(t, os.WriteFile(filepath.Join(s.Root, daemonJSON), []byte(`{"dns":["9.9.9.9"]}`), 0o644))
	must(t, s.writeDaemonJSON())
	if got := readDNS(t, s); !slices.Equal(got.([]any), []any{"9.9.9.9"}) {
		t.Fatalf("user dns = %v, want kept", got)
	}
	// Server running: containers use it.
	startTestDNS(t, s, nil)
	must(t, s.writeDaemonJSON())
	if got := readDNS(t, s); !slices.Equal(got.([]any), []any{"10.254.254.254"}) {
		t.Fatalf("dns = %v, want [10.254.254.254]", got)
	}
	// Server gone (say, port 53 was taken this boot): our stale entry goes.
	s.rooms().dns.Stop()
	must(t, s.writeDaemonJSON())
	if got := readDNS(t, s); got != nil {
		t.Fatalf("dns = %v, want it removed", got)
	}
}

// startTestDNS runs s's DNS server on a loopback port with the given
// upstreams, answering the local names with 10.254.254.254.
func startTestDNS(t *testing.T, s *Server, upstreams []string) string {
	t.Helper()
	must(t, s.rooms().dns.StartOn("127.0.0.1:0", "10.254.254.254", upstreams))
	t.Cleanup(s.rooms().dns.Stop)
	return s.rooms().dns.Addr()
}
