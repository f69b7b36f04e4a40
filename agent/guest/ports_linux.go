package guest

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sort"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/portlist"
	"github.com/vmdock/vmdock/internal/memtrim"
)

type portKey struct {
	Proto string
	IP    string
	Port  int
}

// portLister returns how this watch lists sockets: through sock_diag,
// whose cost does not grow with established connections, falling back for
// good to the /proc/net parser on a kernel without inet_diag. A test's fake
// ProcNet folder always gets the parser.
func (s *Server) portLister() func() ([]portlist.Port, error) {
	if s.ProcNet != "" {
		return func() ([]portlist.Port, error) { return portlist.ProcNet(s.ProcNet) }
	}
	procNet := false
	return func() ([]portlist.Port, error) {
		if !procNet {
			ports, err := portlist.SockDiag()
			if !errors.Is(err, portlist.ErrNoSockDiag) {
				return ports, err
			}
			s.log().Info("listing ports from /proc/net", "reason", err)
			procNet = true
		}
		return portlist.ProcNet("/proc/net")
	}
}

// scanPorts lists the forwardable sockets minus the agent's own and its
// runtimes', and under the containerd runtime the ports published by DNAT
// rules.
func (s *Server) scanPorts(list func() ([]portlist.Port, error)) (map[portKey]bool, error) {
	ports, err := list()
	if err != nil {
		return nil, err
	}
	runtime := s.runtimePorts(ports)
	ports = append(ports, s.dnatPorts()...)
	set := map[portKey]bool{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ports {
		k := portKey{Proto: p.Proto, IP: p.IP.String(), Port: p.Port}
		if !s.ownPorts[portKey{Proto: p.Proto, Port: p.Port}] && !runtime[k] {
			set[k] = true
		}
	}
	return set, nil
}

// runtimeDaemons are the guest's own daemons (by process name): what they
// listen on serves vmdock, not a user, as containerd's CRI streaming server
// on 127.0.0.1 and a random port. A user's published ports are held by
// docker-proxy, the container's own process, or portmap's DNAT rules.
var runtimeDaemons = []string{"containerd", "dockerd", "buildkitd"}

// runtimePorts are the listed sockets the runtime daemons hold. Finding
// them reads every process's fd table, so it runs only when the listing
// has a socket the last one lacked; the watch's other scans reuse it.
func (s *Server) runtimePorts(listed []portlist.Port) map[portKey]bool {
	fresh := false
	seen := make(map[portKey]bool, len(listed))
	s.mu.Lock()
	for _, p := range listed {
		k := portKey{Proto: p.Proto, IP: p.IP.String(), Port: p.Port}
		seen[k] = true
		fresh = fresh || !s.listedPorts[k]
	}
	s.listedPorts = seen
	cached := s.runtimeOwned
	s.mu.Unlock()
	if !fresh {
		return cached
	}
	// Read without the lock: the fd tables take milliseconds.
	found, err := portlist.OwnedBy(s.path("/proc"), s.procNetDir(), runtimeDaemons)
	if err != nil {
		s.log().Debug("find the runtimes' own ports", "err", err)
	}
	owned := make(map[portKey]bool, len(found))
	for _, p := range found {
		owned[portKey{Proto: p.Proto, IP: p.IP.String(), Port: p.Port}] = true
	}
	s.mu.Lock()
	s.runtimeOwned = owned
	s.mu.Unlock()
	return owned
}

func (s *Server) procNetDir() string {
	if s.ProcNet != "" {
		return s.ProcNet
	}
	return s.path("/proc/net")
}

// dnatPorts are the ports CNI's portmap publishes (nerdctl run -p), read
// from the nat table; none unless the containerd runtime runs.
func (s *Server) dnatPorts() []portlist.Port {
	s.mu.Lock()
	on := s.publishDNAT
	s.mu.Unlock()
	if !on {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := s.OS.Run(ctx, "iptables-save", "-t", "nat")
	if err != nil {
		s.mu.Lock()
		first := !s.dnatFailed
		s.dnatFailed = true
		s.mu.Unlock()
		if first {
			s.log().Warn("cannot read the nat table; nerdctl's published ports are not forwarded", "err", err)
		}
		return nil
	}
	return portlist.DNAT(string(out))
}

// addOwnPort hides the agent's own listener from the port watch: forwarding
// it to the host would loop.
func (s *Server) addOwnPort(proto string, port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ownPorts == nil {
		s.ownPorts = map[portKey]bool{}
	}
	s.ownPorts[portKey{Proto: proto, Port: port}] = true
}

// diffPorts returns the events that turn old into cur, sorted for stable
// output.
func diffPorts(old, cur map[portKey]bool) []agent.PortEvent {
	var ev []agent.PortEvent
	for k := range cur {
		if !old[k] {
			ev = append(ev, agent.PortEvent{Added: true, Proto: k.Proto, IP: k.IP, Port: k.Port})
		}
	}
	for k := range old {
		if !cur[k] {
			ev = append(ev, agent.PortEvent{Proto: k.Proto, IP: k.IP, Port: k.Port})
		}
	}
	sort.Slice(ev, func(i, j int) bool {
		a, b := ev[i], ev[j]
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return a.IP < b.IP
	})
	return ev
}

func (s *Server) watchPorts(ctx context.Context, st net.Conn) {
	defer st.Close()
	if err := agent.Reply(st, nil); err != nil {
		return
	}
	// The host closing the stream is the only way a watch ends.
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, st)
		close(gone)
	}()
	poll := pollTimes{fast: s.PortPoll, busy: s.PortPollBusy, idle: s.PortPollIdle}.withDefaults()
	activity := s.activity()
	list := s.portLister()
	old := map[portKey]bool{}
	synced := false
	busyUntil := time.Now().Add(poll.busy)
	trimmed := false  // since the host last went quiet
	due := time.Now() // of the next scan
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-activity:
			// Look soon when the watch was idling, without postponing a
			// scan already due: streams may arrive faster than poll.fast.
			now := time.Now()
			busyUntil = now.Add(poll.busy)
			trimmed = false
			if due.Sub(now) > poll.fast {
				due = now.Add(poll.fast)
				timer.Reset(poll.fast)
			}
			continue
		case <-gone:
			return
		case <-ctx.Done():
			return
		}
		cur, err := s.scanPorts(list)
		if err != nil {
			s.log().Warn("scan listening ports", "err", err)
		} else {
			ev := diffPorts(old, cur)
			for _, e := range ev {
				if err := agent.WriteJSONLine(st, e); err != nil {
					return
				}
			}
			if !synced {
				// The host drops forwards this first listing lacks.
				if err := agent.WriteJSONLine(st, agent.PortEvent{Synced: true}); err != nil {
					return
				}
				synced = true
			}
			old = cur
			if len(ev) > 0 {
				busyUntil = time.Now().Add(poll.busy)
			}
		}
		now := time.Now()
		if !trimmed && !now.Before(busyUntil) {
			s.trimWhenQuiet()
			trimmed = true
		}
		wait := poll.next(now, busyUntil)
		due = now.Add(wait)
		timer.Reset(wait)
	}
}

// trimWhenQuiet hands the memory a burst of work left behind back to the
// guest when the host goes quiet. Go's scavenger returns it only slowly, so
// an agent that had just forwarded a load kept 27 MiB of private RSS while
// idle; one collection at the edge costs a few milliseconds and leaves the
// idle agent near its floor. A memory limit was not set instead: the sync
// engine's heap grows with the synced tree, and a limit below it would make
// the collector run non-stop on an emulated CPU. It also pages out the
// binary's code the burst used (see memtrim).
func (s *Server) trimWhenQuiet() {
	if s.trimMemory != nil {
		s.trimMemory()
		return
	}
	if err := memtrim.Trim(); err != nil {
		s.log().Debug("page out the agent's cold code", "err", err)
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s.log().Debug("host quiet: returned free memory", "heapInuseMiB", m.HeapInuse>>20, "stackInuseMiB", m.StackInuse>>20, "sysMiB", m.Sys>>20, "releasedMiB", m.HeapReleased>>20, "goroutines", runtime.NumGoroutine())
}

// pollTimes are the port watch's periods; see Server.PortPoll.
type pollTimes struct{ fast, busy, idle time.Duration }

func (p pollTimes) withDefaults() pollTimes {
	if p.fast <= 0 {
		p.fast = 250 * time.Millisecond
	}
	if p.busy <= 0 {
		p.busy = 10 * time.Second
	}
	if p.idle <= 0 {
		p.idle = time.Second
	}
	p.idle = max(p.idle, p.fast)
	return p
}

// next is the wait before the following scan.
func (p pollTimes) next(now, busyUntil time.Time) time.Duration {
	if now.Before(busyUntil) {
		return p.fast
	}
	return p.idle
}
