package egress

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	good := map[string]string{
		"example.com": "example.com", "Example.COM.": "example.com", "*.github.com:443": "*.github.com:443",
		"198.18.0.1": "198.18.0.1", "198.18.0.1:53": "198.18.0.1:53", "registry-1.docker.io:443": "registry-1.docker.io:443",
	}
	for in, want := range good {
		r, err := ParseRule(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRule(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, bad := range []string{"", "localhost", "http://example.com", "example.com:0", "example.com:x", "exa mple.com", "::1", "127.0.0.1", "0.0.0.0", "*.", "a..b", "example.com/path", "-a.com"} {
		if _, err := ParseRule(bad); err == nil || !strings.Contains(err.Error(), "accepted:") {
			t.Errorf("ParseRule(%q) = %v; want an error naming what is accepted", bad, err)
		}
	}
}

// A flow goes out only to a literal allowed address or to an address the
// DNS answered for an allowed name, on the rule's port; every refusal is
// logged with its destination, a retried one once.
func TestPolicyPinsWhatDNSAnswered(t *testing.T) {
	var log bytes.Buffer
	p, err := New([]string{"api.example.com:443", "*.cdn.test", "198.18.0.9"}, &log)
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort
	if p.Allows("tcp", ap("198.18.0.1:443")) {
		t.Fatal("an address no DNS answer named is allowed")
	}
	if !p.AllowsName("API.example.com.") || !p.AllowsName("img.cdn.test") || p.AllowsName("cdn.test") || p.AllowsName("evil.test") {
		t.Fatal("names: want api.example.com and *.cdn.test's subdomains only")
	}
	p.Pin("api.example.com.", []netip.Addr{netip.MustParseAddr("198.18.0.1")})
	p.Pin("img.cdn.test", []netip.Addr{netip.MustParseAddr("198.18.0.2")})
	p.Pin("evil.test", []netip.Addr{netip.MustParseAddr("198.18.0.3")})
	cases := map[string]bool{
		"198.18.0.1:443": true, "198.18.0.1:80": false, "198.18.0.2:80": true, "198.18.0.2:53": true,
		"198.18.0.3:80": false, "198.18.0.9:22": true, "198.18.0.10:22": false,
	}
	for dst, want := range cases {
		if got := p.Allows("tcp", ap(dst)); got != want {
			t.Errorf("Allows(tcp, %s) = %v, want %v", dst, got, want)
		}
	}
	p.Allows("tcp", ap("198.18.0.3:80"))
	out := log.String()
	for _, want := range []string{"refused tcp 198.18.0.1:80\n", "refused dns evil.test\n", "refused tcp 198.18.0.3:80\n", "refused tcp 198.18.0.10:22\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "198.18.0.3:80"); n != 1 {
		t.Errorf("a retried refusal logged %d times, want once:\n%s", n, out)
	}
}
