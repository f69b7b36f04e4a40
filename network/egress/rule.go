package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// RuleGrammar is the form of an allow entry, quoted in its errors.
const RuleGrammar = "HOST[:PORT]: a DNS name (example.com), a wildcard for its subdomains (*.example.com) or an IPv4 address, optionally with a port 1-65535"

// Rule is one allow entry. Exactly one of Name and IP is set; Port 0
// allows every port.
type Rule struct {
	Name     string // lower case, no trailing dot
	Wildcard bool   // Name's subdomains, not Name itself
	IP       netip.Addr
	Port     uint16
}

// ParseRule parses one allow entry.
func ParseRule(s string) (Rule, error) {
	host, port, err := splitPort(s)
	if err != nil {
		return Rule{}, err
	}
	r := Rule{Port: port}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !ip.Is4() || ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() {
			return Rule{}, fmt.Errorf("allow entry %q: %s is not an address the sandbox can reach; accepted: %s", s, host, RuleGrammar)
		}
		r.IP = ip
		return r, nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		r.Wildcard, name = true, rest
	}
	if !validName(name) {
		return Rule{}, fmt.Errorf("allow entry %q: not a host; accepted: %s", s, RuleGrammar)
	}
	r.Name = name
	return r, nil
}

func splitPort(s string) (string, uint16, error) {
	if strings.Count(s, ":") != 1 || strings.ContainsAny(s, "/@ ") {
		if strings.Contains(s, ":") {
			return "", 0, fmt.Errorf("allow entry %q: not a host; accepted: %s", s, RuleGrammar)
		}
		return s, 0, nil
	}
	host, p, _ := strings.Cut(s, ":")
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("allow entry %q: port %q; accepted: %s", s, p, RuleGrammar)
	}
	return host, uint16(n), nil
}

// validName: letters, digits and hyphens in labels of 1-63, at least two
// labels (a bare word is a typo more often than a host), 253 at most.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 253 {
		return false
	}
	labels := strings.Split(name, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func (r Rule) String() string {
	host := r.Name
	if r.Wildcard {
		host = "*." + host
	}
	if r.IP.IsValid() {
		host = r.IP.String()
	}
	if r.Port == 0 {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(int(r.Port)))
}

// matchesName says whether name (lower case, no trailing dot) is r's.
func (r Rule) matchesName(name string) bool {
	if r.Name == "" {
		return false
	}
	if r.Wildcard {
		return strings.HasSuffix(name, "."+r.Name)
	}
	return name == r.Name
}

func (r Rule) allowsPort(port uint16) bool { return r.Port == 0 || r.Port == port }
