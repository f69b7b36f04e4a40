package hostagent

import (
	"context"
	"time"

	"github.com/vmdock/vmdock/vm/control"
)

// guestDNSAnswer bounds the status's question to the guest: a status must
// answer even while the guest is slow.
const guestDNSAnswer = 2 * time.Second

// guestDNS asks the guest agent where its DNS forwarder sends lookups;
// nil without a session.
func (ha *hostAgent) guestDNS() *control.GuestDNSStatus {
	c := ha.liveClient()
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), guestDNSAnswer)
	defer cancel()
	info, err := c.Info(ctx)
	if err != nil {
		return &control.GuestDNSStatus{Upstreams: []string{}, Error: err.Error()}
	}
	ups := info.DNSUpstreams
	if ups == nil {
		ups = []string{}
	}
	return &control.GuestDNSStatus{Upstreams: ups}
}
