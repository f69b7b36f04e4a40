package egress

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// maxPins bounds the addresses remembered for allowed names: a guest
// looking up allowed names without end must not grow the host agent
// without end. Past it the oldest name's addresses are forgotten (a new
// lookup pins them again).
const maxPins = 4096

// logRepeat is how often the same refusal is written again while the
// guest keeps trying it.
const logRepeat = 10 * time.Second

// Policy decides the sandbox's outbound flows. Safe for concurrent use.
type Policy struct {
	rules []Rule
	log   io.Writer
	logMu sync.Mutex // one line at a time

	mu     sync.Mutex
	pins   map[netip.Addr][]uint16 // port 0: any
	order  []netip.Addr            // pinning order, for the cap
	logged map[string]time.Time
	now    func() time.Time
}

// New parses allow (see ParseRule) into a policy that writes its refusals
// to log (nil: nowhere).
func New(allow []string, log io.Writer) (*Policy, error) {
	p := &Policy{log: log, pins: map[netip.Addr][]uint16{}, logged: map[string]time.Time{}, now: time.Now}
	for _, a := range allow {
		r, err := ParseRule(a)
		if err != nil {
			return nil, err
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

// Rules are the policy's allow entries.
func (p *Policy) Rules() []Rule { return append([]Rule(nil), p.rules...) }

// AllowsName says whether the sandbox's DNS may answer name; a refusal is
// logged.
func (p *Policy) AllowsName(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for _, r := range p.rules {
		if r.matchesName(name) {
			return true
		}
	}
	p.refused("dns", name)
	return false
}

// Pin records that the DNS answered name with addrs: flows to them are
// allowed on the ports name's rules allow.
func (p *Policy) Pin(name string, addrs []netip.Addr) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	var ports []uint16
	for _, r := range p.rules {
		if r.matchesName(name) {
			ports = append(ports, r.Port)
		}
	}
	if len(ports) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		a = a.Unmap()
		if _, ok := p.pins[a]; !ok {
			p.order = append(p.order, a)
		}
		p.pins[a] = mergePorts(p.pins[a], ports)
	}
	for len(p.order) > maxPins {
		delete(p.pins, p.order[0])
		p.order = p.order[1:]
	}
}

func mergePorts(have, add []uint16) []uint16 {
	for _, port := range add {
		found := false
		for _, h := range have {
			found = found || h == port
		}
		if !found {
			have = append(have, port)
		}
	}
	return have
}

// Allows says whether a new flow of proto ("tcp" or "udp") to dst may
// go out; a refusal is logged with its destination.
func (p *Policy) Allows(proto string, dst netip.AddrPort) bool {
	ip, port := dst.Addr().Unmap(), dst.Port()
	for _, r := range p.rules {
		if r.IP == ip && r.allowsPort(port) {
			return true
		}
	}
	p.mu.Lock()
	ports := p.pins[ip]
	p.mu.Unlock()
	for _, allowed := range ports {
		if allowed == 0 || allowed == port {
			return true
		}
	}
	p.refused(proto, dst.String())
	return false
}

// refused appends one line to the log, once per logRepeat for the same
// attempt: a guest retrying in a loop fills no disk.
func (p *Policy) refused(what, dst string) {
	if p.log == nil {
		return
	}
	key := what + " " + dst
	now := p.now()
	p.mu.Lock()
	last, seen := p.logged[key]
	if seen && now.Sub(last) < logRepeat {
		p.mu.Unlock()
		return
	}
	if len(p.logged) > maxPins {
		clear(p.logged)
	}
	p.logged[key] = now
	p.mu.Unlock()
	p.logMu.Lock()
	defer p.logMu.Unlock()
	_, _ = fmt.Fprintf(p.log, "%s refused %s %s\n", now.UTC().Format(time.RFC3339), what, dst)
}
