package forward

import (
	"fmt"
	"strconv"
	"strings"
)

// RuleSpec is one configured port map as written by the user (the same
// shape as config.PortRule, copied so this package does not import vm/config).
type RuleSpec struct {
	Guest string // "8080" or "8000-8010"
	Host  string // same shape and length as Guest
	Proto string // tcp, udp, or empty for both
}

// PortRange is an inclusive range of ports.
type PortRange struct{ Lo, Hi int }

func (r PortRange) contains(p int) bool       { return p >= r.Lo && p <= r.Hi }
func (r PortRange) overlaps(o PortRange) bool { return r.Lo <= o.Hi && o.Lo <= r.Hi }
func (r PortRange) size() int                 { return r.Hi - r.Lo + 1 }

func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(r.Lo)
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// ParsePortRange parses "8080" or "8000-8010".
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	a, err := parsePort(lo)
	if err != nil {
		return PortRange{}, fmt.Errorf("bad port %q: want a port 1-65535 or a range like 8000-8010", s)
	}
	if !isRange {
		return PortRange{a, a}, nil
	}
	b, err := parsePort(hi)
	if err != nil || b < a {
		return PortRange{}, fmt.Errorf("bad port range %q: want LOW-HIGH with 1 <= LOW <= HIGH <= 65535", s)
	}
	return PortRange{a, b}, nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q out of range", s)
	}
	return p, nil
}

type rule struct {
	proto string // "" for both
	guest PortRange
	host  PortRange
}

func (r rule) matches(proto string) bool { return r.proto == "" || r.proto == proto }

// Rules decide which guest ports are forwarded and to which host port.
// The zero value (and nil) forwards every port to the same host port.
type Rules struct {
	rules  []rule
	ignore []PortRange
}

// ParseRules validates the configured maps and ignore list. An explicit
// map wins over the ignore list, so "ignore 1-1023, map 80 to 8080" works.
func ParseRules(specs []RuleSpec, ignore []string) (*Rules, error) {
	rs := &Rules{}
	for i, s := range specs {
		proto := strings.ToLower(strings.TrimSpace(s.Proto))
		if proto != "" && proto != "tcp" && proto != "udp" {
			return nil, fmt.Errorf("port rule %d: bad proto %q: want tcp, udp or empty for both", i+1, s.Proto)
		}
		g, err := ParsePortRange(s.Guest)
		if err != nil {
			return nil, fmt.Errorf("port rule %d guest: %w", i+1, err)
		}
		hostSpec := s.Host
		if strings.TrimSpace(hostSpec) == "" {
			hostSpec = g.String()
		}
		h, err := ParsePortRange(hostSpec)
		if err != nil {
			return nil, fmt.Errorf("port rule %d host: %w", i+1, err)
		}
		if g.size() != h.size() {
			return nil, fmt.Errorf("port rule %d: guest %s and host %s differ in length: ranges must map one to one", i+1, g, h)
		}
		r := rule{proto: proto, guest: g, host: h}
		for j, o := range rs.rules {
			if !protoOverlap(r.proto, o.proto) {
				continue
			}
			if r.guest.overlaps(o.guest) {
				return nil, fmt.Errorf("port rule %d: guest %s overlaps rule %d (guest %s)", i+1, g, j+1, o.guest)
			}
			if r.host.overlaps(o.host) {
				return nil, fmt.Errorf("port rule %d: host %s overlaps rule %d (host %s)", i+1, h, j+1, o.host)
			}
		}
		rs.rules = append(rs.rules, r)
	}
	for _, s := range ignore {
		r, err := ParsePortRange(s)
		if err != nil {
			return nil, fmt.Errorf("port ignore list: %w", err)
		}
		rs.ignore = append(rs.ignore, r)
	}
	return rs, nil
}

func protoOverlap(a, b string) bool { return a == "" || b == "" || a == b }

// Map returns the host port for a guest port, and false when the port is
// not forwarded. Ports without a rule keep their number.
func (rs *Rules) Map(proto string, guestPort int) (hostPort int, ok bool) {
	if guestPort < 1 || guestPort > 65535 {
		return 0, false
	}
	if rs == nil {
		return guestPort, true
	}
	for _, r := range rs.rules {
		if r.matches(proto) && r.guest.contains(guestPort) {
			return r.host.Lo + (guestPort - r.guest.Lo), true
		}
	}
	for _, r := range rs.ignore {
		if r.contains(guestPort) {
			return 0, false
		}
	}
	return guestPort, true
}
