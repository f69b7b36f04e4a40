package portlist

import (
	"bufio"
	"net/netip"
	"strconv"
	"strings"
)

// CNI's portmap plugin (nerdctl's `-p`) publishes a container port with an
// iptables DNAT rule, not a listening socket, so SockDiag and ProcNet never
// see it. Each mapping is one rule in a per-container chain named
// CNI-DN-<hash>:
//
//	-A CNI-DN-x -p tcp -m tcp --dport 18090 -j DNAT --to-destination 10.4.0.3:80
//	-A CNI-DN-x -d 127.0.0.1/32 -p tcp -m tcp --dport 18091 -j DNAT --to-destination 10.4.0.3:81
//
// The chain's other rules (marks for hairpin and localhost traffic) jump
// elsewhere and are skipped.

// cniDNATChainPrefix names portmap's per-container chains.
const cniDNATChainPrefix = "CNI-DN-"

// maxDNATRange bounds how many ports one rule with a --dport range may add:
// a typo such as 1:65535 must not open every port on the host.
const maxDNATRange = 1024

// DNAT lists the published ports in `iptables-save -t nat` output, in the
// same form and order as the socket sources: the address is the rule's
// destination (-d) or the any address.
func DNAT(iptablesSave string) []Port {
	seen := map[Port]bool{}
	var out []Port
	sc := bufio.NewScanner(strings.NewReader(iptablesSave))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, p := range dnatRule(sc.Text()) {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sortPorts(out)
	return out
}

// dnatRule returns the published ports of one iptables-save line, if it is
// a portmap DNAT rule.
func dnatRule(line string) []Port {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "-A" || !strings.HasPrefix(f[1], cniDNATChainPrefix) {
		return nil
	}
	var proto, dports, dest, target string
	for i := 2; i+1 < len(f); i++ {
		switch f[i] {
		case "-p":
			proto = f[i+1]
		case "--dport":
			dports = f[i+1]
		case "-d":
			dest = f[i+1]
		case "-j":
			target = f[i+1]
		}
	}
	if target != "DNAT" || (proto != "tcp" && proto != "udp") {
		return nil
	}
	ip := netip.IPv4Unspecified()
	if dest != "" {
		pfx, err := netip.ParsePrefix(dest)
		if err != nil {
			a, aerr := netip.ParseAddr(dest)
			if aerr != nil {
				return nil
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		if pfx.Bits() != pfx.Addr().BitLen() {
			return nil // a whole subnet is not one address to bind on the host
		}
		ip = pfx.Addr()
	}
	first, last, ok := portRange(dports)
	if !ok {
		return nil
	}
	var out []Port
	for port := first; port <= last; port++ {
		if forwardable(ip, port) {
			out = append(out, Port{Proto: proto, IP: ip, Port: port})
		}
	}
	return out
}

// portRange parses iptables' "N" or "N:M".
func portRange(s string) (first, last int, ok bool) {
	a, b, isRange := strings.Cut(s, ":")
	first, err := strconv.Atoi(a)
	if err != nil || first < 1 || first > 65535 {
		return 0, 0, false
	}
	last = first
	if isRange {
		if last, err = strconv.Atoi(b); err != nil || last < first || last > 65535 || last-first >= maxDNATRange {
			return 0, 0, false
		}
	}
	return first, last, true
}
