// Package dnsserver is a tiny DNS responder for clients that ask the
// system resolver (Safari, Python, Go with cgo): every name under
// vmdock.localhost is 127.0.0.1 and ::1, where the router listens;
// anything else is refused, so pointing the resolver at it for that one
// domain (macOS /etc/resolver/vmdock.localhost) can change no other name.
package dnsserver

import (
	"errors"
	"log/slog"
	"net"
	"strings"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/vmdock/vmdock/network/domains"
)

// ttl is short: the answer never changes, but a resolver file removed
// should stop mattering soon.
const ttl = 60

// Serve answers queries on pc until it is closed.
func Serve(pc net.PacketConn) error {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		resp, ok := Answer(buf[:n])
		if !ok {
			continue
		}
		if _, err := pc.WriteTo(resp, from); err != nil {
			slog.Debug("dns: reply", "to", from, "err", err)
		}
	}
}

// Answer is the reply to one query; false: not a query worth a reply.
func Answer(req []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	ours := h.OpCode == 0 && q.Class == dnsmessage.ClassINET && domains.Under(name)
	if ours {
		rh.Authoritative = true
	} else {
		rh.RCode = dnsmessage.RCodeRefused
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: ttl}
	switch {
	case ours && q.Type == dnsmessage.TypeA:
		if b.AResource(rr, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}}) != nil {
			return nil, false
		}
	case ours && q.Type == dnsmessage.TypeAAAA:
		if b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: [16]byte{15: 1}}) != nil {
			return nil, false
		}
	}
	// other types of our names: no records (NODATA), so clients ask for
	// A and AAAA instead of giving up
	out, err := b.Finish()
	if err != nil {
		return nil, false
	}
	return out, true
}
