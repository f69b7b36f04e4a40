package dnsforward

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vmdock/vmdock/agent/guest/guestos"
)

// LeasesDir holds systemd-networkd's DHCP leases.
const LeasesDir = "/run/systemd/netif/leases"

// WriteResolvConf writes the given servers, else the ones DHCP handed out; with
// neither it keeps the image's resolv.conf.
func (s *Forwarder) WriteResolvConf(servers []string) error {
	for _, d := range servers {
		if net.ParseIP(d) == nil {
			return fmt.Errorf("DNS server %q is not an IP address", d)
		}
	}
	if len(servers) == 0 {
		servers = s.LeaseDNS()
	}
	if len(servers) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("# written by vmdock-agent\n")
	for _, d := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", d)
	}
	p := s.Path("/etc/resolv.conf")
	// A symlink to systemd-resolved's stub would be rewritten behind us.
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		_ = os.Remove(p)
	}
	return guestos.WriteFile(p, []byte(b.String()), 0o644)
}

// LeaseDNS reads DNS= from systemd-networkd's DHCP leases.
func (s *Forwarder) LeaseDNS() []string {
	files, _ := filepath.Glob(filepath.Join(s.Path(LeasesDir), "*"))
	sort.Strings(files)
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			v, ok := strings.CutPrefix(l, "DNS=")
			if !ok {
				continue
			}
			for _, d := range strings.Fields(v) {
				if net.ParseIP(d) != nil && !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
		}
	}
	return out
}
