package ports

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/agent/portlist"
	"github.com/vmdock/vmdock/internal/memtrim"
)

// Watch reports the guest's listening ports to the host. One Watch lives
// as long as the agent; each host session watches through Serve.
type Watch struct {
	guestos.Sys
	// ProcNet is the folder with tcp, tcp6, udp, udp6; "" lists through
	// sock_diag, falling back to /proc/net.
	ProcNet string
	Poll    Poll

	// trimMemory runs once each time the host goes quiet; default
	// trimWhenQuiet's own. Tests count the calls.
	trimMemory func()

	mu sync.Mutex
	// hostActivity has a token when the host opened a stream since the
	// watch last looked.
	hostActivity chan struct{}
	own          map[key]bool
	// listed is the watch's last listing, runtimeOwned the part of it the
	// runtime daemons hold (see runtimePorts).
	listed       map[key]bool
	runtimeOwned map[key]bool
	// publishDNAT: the containerd runtime runs, so published ports are
	// portmap's DNAT rules as well as listening sockets.
	publishDNAT bool
	dnatFailed  bool // logged once
}

type key struct {
	Proto string
	IP    string
	Port  int
}

func keyOf(p portlist.Port) key { return key{Proto: p.Proto, IP: p.IP.String(), Port: p.Port} }

// HideOwnPort hides the agent's own listener from the watch: forwarding it
// to the host would loop.
func (w *Watch) HideOwnPort(proto string, port int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.own == nil {
		w.own = map[key]bool{}
	}
	w.own[key{Proto: proto, Port: port}] = true
}

// PublishDNAT has the watch read portmap's DNAT rules: the containerd
// runtime publishes ports there as well as with sockets.
func (w *Watch) PublishDNAT() {
	w.mu.Lock()
	w.publishDNAT = true
	w.mu.Unlock()
}

// NoteHostActivity tells the watch the host is busy with the guest.
func (w *Watch) NoteHostActivity() {
	select {
	case w.activity() <- struct{}{}:
	default:
	}
}

func (w *Watch) activity() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hostActivity == nil {
		w.hostActivity = make(chan struct{}, 1)
	}
	return w.hostActivity
}

// lister returns how this watch lists sockets: through sock_diag, whose
// cost does not grow with established connections, falling back for good
// to the /proc/net parser on a kernel without inet_diag. A test's fake
// ProcNet folder always gets the parser.
func (w *Watch) lister() func() ([]portlist.Port, error) {
	if w.ProcNet != "" {
		return func() ([]portlist.Port, error) { return portlist.ProcNet(w.ProcNet) }
	}
	procNet := false
	return func() ([]portlist.Port, error) {
		if !procNet {
			ports, err := portlist.SockDiag()
			if !errors.Is(err, portlist.ErrNoSockDiag) {
				return ports, err
			}
			w.Logger().Info("listing ports from /proc/net", "reason", err)
			procNet = true
		}
		return portlist.ProcNet("/proc/net")
	}
}

// scan lists the forwardable sockets minus the agent's own and its
// runtimes', and under the containerd runtime the ports published by DNAT
// rules.
func (w *Watch) scan(list func() ([]portlist.Port, error)) (map[key]bool, error) {
	ports, err := list()
	if err != nil {
		return nil, err
	}
	runtime := w.runtimePorts(ports)
	ports = append(ports, w.dnatPorts()...)
	set := map[key]bool{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range ports {
		k := keyOf(p)
		if !w.own[key{Proto: p.Proto, Port: p.Port}] && !runtime[k] {
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
func (w *Watch) runtimePorts(listed []portlist.Port) map[key]bool {
	fresh := false
	seen := make(map[key]bool, len(listed))
	w.mu.Lock()
	for _, p := range listed {
		k := keyOf(p)
		seen[k] = true
		fresh = fresh || !w.listed[k]
	}
	w.listed = seen
	cached := w.runtimeOwned
	w.mu.Unlock()
	if !fresh {
		return cached
	}
	// Read without the lock: the fd tables take milliseconds.
	found, err := portlist.OwnedBy(w.Path("/proc"), w.procNetDir(), runtimeDaemons)
	if err != nil {
		w.Logger().Debug("find the runtimes' own ports", "err", err)
	}
	owned := make(map[key]bool, len(found))
	for _, p := range found {
		owned[keyOf(p)] = true
	}
	w.mu.Lock()
	w.runtimeOwned = owned
	w.mu.Unlock()
	return owned
}

func (w *Watch) procNetDir() string {
	if w.ProcNet != "" {
		return w.ProcNet
	}
	return w.Path("/proc/net")
}

// dnatPorts are the ports CNI's portmap publishes (nerdctl run -p), read
// from the nat table; none unless the containerd runtime runs.
func (w *Watch) dnatPorts() []portlist.Port {
	w.mu.Lock()
	on := w.publishDNAT
	w.mu.Unlock()
	if !on {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := w.OS.Run(ctx, "iptables-save", "-t", "nat")
	if err != nil {
		w.mu.Lock()
		first := !w.dnatFailed
		w.dnatFailed = true
		w.mu.Unlock()
		if first {
			w.Logger().Warn("cannot read the nat table; nerdctl's published ports are not forwarded", "err", err)
		}
		return nil
	}
	return portlist.DNAT(string(out))
}

// diff returns the events that turn old into cur, sorted for stable
// output.
func diff(old, cur map[key]bool) []agent.PortEvent {
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

// Serve answers the host's watch request on st, then reports each port
// that opens or closes until the host closes st or ctx ends. It closes st.
func (w *Watch) Serve(ctx context.Context, st net.Conn) {
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
	tick := newTicker(w.Poll)
	defer tick.stop()
	activity := w.activity()
	list := w.lister()
	var old map[key]bool // nil until the first listing reached the host
	for {
		select {
		case <-tick.C():
		case <-activity:
			tick.hostBusy(time.Now())
			continue
		case <-gone:
			return
		case <-ctx.Done():
			return
		}
		cur, err := w.scan(list)
		if err != nil {
			w.Logger().Warn("scan listening ports", "err", err)
		} else {
			changed, err := w.report(st, old, cur)
			if err != nil {
				return
			}
			old = cur
			if changed {
				tick.changed(time.Now())
			}
		}
		if tick.looked(time.Now()) {
			w.trimWhenQuiet()
		}
	}
}

// report writes the events that turn old into cur, and after the first
// listing (old nil) the mark the host drops the forwards it lacks by.
func (w *Watch) report(st net.Conn, old, cur map[key]bool) (changed bool, err error) {
	ev := diff(old, cur)
	for _, e := range ev {
		if err := agent.WriteJSONLine(st, e); err != nil {
			return false, err
		}
	}
	if old == nil {
		if err := agent.WriteJSONLine(st, agent.PortEvent{Synced: true}); err != nil {
			return false, err
		}
	}
	return len(ev) > 0, nil
}

// trimWhenQuiet hands the memory a burst of work left behind back to the
// guest when the host goes quiet. Go's scavenger returns it only slowly, so
// an agent that had just forwarded a load kept 27 MiB of private RSS while
// idle; one collection at the edge costs a few milliseconds and leaves the
// idle agent near its floor. A memory limit was not set instead: the sync
// engine's heap grows with the synced tree, and a limit below it would make
// the collector run non-stop on an emulated CPU. It also pages out the
// binary's code the burst used (see memtrim).
func (w *Watch) trimWhenQuiet() {
	if w.trimMemory != nil {
		w.trimMemory()
		return
	}
	if err := memtrim.Trim(); err != nil {
		w.Logger().Debug("page out the agent's cold code", "err", err)
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w.Logger().Debug("host quiet: returned free memory", "heapInuseMiB", m.HeapInuse>>20, "stackInuseMiB", m.StackInuse>>20, "sysMiB", m.Sys>>20, "releasedMiB", m.HeapReleased>>20, "goroutines", runtime.NumGoroutine())
}
