package usernet

import (
	"net"
	"testing"
)

// Cloud metadata services are out of the guest's reach wherever they live
// (link-local, Alibaba's 100.100.100.200, Azure's 168.63.129.16), while
// the rest of 100.64/10, which Tailscale uses, is relayed. Checked on the
// relay's decision, so no packet leaves this machine.
func TestMetadataServicesAreRefused(t *testing.T) {
	s := newStack(t, Config{})
	for _, ip := range []string{"169.254.169.254", "100.100.100.200", "168.63.129.16"} {
		if got := s.hostTarget(addr4(net.ParseIP(ip)), 80); got != "" {
			t.Errorf("the guest's packet to %s:80 is relayed to %s, want refused", ip, got)
		}
	}
	for _, ip := range []string{"100.64.0.1", "100.100.100.100", "100.101.102.103", "168.63.129.17", "10.0.2.2"} {
		if got := s.hostTarget(addr4(net.ParseIP(ip)), 80); got == "" {
			t.Errorf("the guest's packet to %s:80 is refused, want relayed", ip)
		}
	}
}
