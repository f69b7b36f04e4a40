package dnsforward

import (
	"os"
	"path/filepath"
	"testing"
)

// The given servers are written, else the DHCP lease's; with neither the
// image's resolv.conf stays. A link to resolved's stub is replaced, not
// written through.
func TestWriteResolvConf(t *testing.T) {
	s, _ := newTestServer(t)
	conf := filepath.Join(s.Root, "etc/resolv.conf")
	must(t, os.WriteFile(conf, []byte("nameserver 192.0.2.9\n"), 0o644))
	must(t, s.WriteResolvConf(nil))
	if b, _ := os.ReadFile(conf); string(b) != "nameserver 192.0.2.9\n" {
		t.Fatalf("without servers or a lease: %q, want the image's", b)
	}
	lease := filepath.Join(s.Root, LeasesDir, "2")
	must(t, os.MkdirAll(filepath.Dir(lease), 0o755))
	must(t, os.WriteFile(lease, []byte("ADDRESS=10.0.2.15\nDNS=10.0.2.3 10.0.2.3 bogus\n"), 0o644))
	must(t, os.Remove(conf))
	must(t, os.Symlink("../run/systemd/resolve/stub-resolv.conf", conf))
	must(t, s.WriteResolvConf(nil))
	if fi, err := os.Lstat(conf); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Fatalf("resolved's link kept: %v", err)
	}
	if b, _ := os.ReadFile(conf); string(b) != "# written by vmdock-agent\nnameserver 10.0.2.3\n" {
		t.Fatalf("from the lease: %q", b)
	}
	must(t, s.WriteResolvConf([]string{"1.1.1.1"}))
	if b, _ := os.ReadFile(conf); string(b) != "# written by vmdock-agent\nnameserver 1.1.1.1\n" {
		t.Fatalf("given: %q", b)
	}
	if err := s.WriteResolvConf([]string{"dns.example"}); err == nil {
		t.Fatal("a name as a server: want an error")
	}
}

// A DNS server that cannot listen (its address is not this machine's) is
// reported, not fatal: containers keep the guest's resolvers.
func TestSetupWithoutTheAddress(t *testing.T) {
	s, _ := newTestServer(t)
	if s.Setup("192.0.2.1", nil) {
		t.Fatal("Setup on an address this machine lacks reported a running server")
	}
	if s.IP() != "" || s.Addr() != "" {
		t.Fatalf("a server registered: %q %q", s.IP(), s.Addr())
	}
	if got := s.CurrentUpstreams(); got == nil {
		t.Fatal("CurrentUpstreams is nil without a server")
	}
}
