package hostagent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/vmdock/vmdock/network/forward"
	"github.com/vmdock/vmdock/network/usernet"
	"github.com/vmdock/vmdock/vm/control"
)

// watchdogEvery is how often the watchdog looks at the network paths.
// A look costs a few locks and atomic reads while nothing failed, so a
// listener that died is bound again within this, well inside the 10 s a
// user would wait before retrying by hand.
const watchdogEvery = 5 * time.Second

// watchPath is one path the watchdog looks after. check returns what is
// wrong with it ("": healthy) and what it mended ("": nothing); active
// asks for the checks that cost a round trip, made after a wake or while
// the path is unhealthy.
type watchPath struct {
	name  string
	check func(ctx context.Context, active bool) (problem, repaired string)
}

// watchState is the watchdog and what its paths remember between looks
// (only its goroutine touches relaySeen).
type watchState struct {
	dog       *watchdog
	relaySeen int64
}

// watchdog keeps each path's last health and the last repair for status.
type watchdog struct {
	mu      sync.Mutex
	health  []control.PathHealth
	last    *control.WatchdogRepair
	checked time.Time
	// wake asks for an active round at once (the host woke).
	wake chan struct{}
}

func newWatchdog() *watchdog { return &watchdog{wake: make(chan struct{}, 1)} }

// kick runs an active round soon.
func (w *watchdog) kick() {
	if w == nil {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run looks at paths on each tick and each kick until ctx ends; nothing
// while paused (the VM's paths are parked, and a look would wake nothing
// anyway).
func (w *watchdog) run(ctx context.Context, ticks <-chan time.Time, paused func() bool, paths func() []watchPath) {
	for {
		active := false
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		case <-w.wake:
			active = true
		}
		if paused() {
			continue
		}
		w.round(ctx, paths(), active)
	}
}

// round checks every path, actively for those unhealthy at the last look
// too, and logs each change of health and each repair.
func (w *watchdog) round(ctx context.Context, paths []watchPath, active bool) {
	health := make([]control.PathHealth, 0, len(paths))
	for _, p := range paths {
		problem, repaired := p.check(ctx, active || !w.healthy(p.name))
		if repaired != "" {
			slog.Warn("watchdog repaired a network path", "path", p.name, "did", repaired)
			w.noteRepair(p.name, repaired)
		}
		if was := w.problem(p.name); problem != was {
			if problem != "" {
				slog.Warn("watchdog: network path broken", "path", p.name, "problem", problem)
			} else {
				slog.Info("watchdog: network path healthy again", "path", p.name, "was", was)
			}
		}
		health = append(health, control.PathHealth{Path: p.name, OK: problem == "", Problem: problem})
	}
	w.mu.Lock()
	w.health, w.checked = health, time.Now()
	w.mu.Unlock()
}

func (w *watchdog) problem(path string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.health {
		if h.Path == path {
			return h.Problem
		}
	}
	return ""
}

func (w *watchdog) healthy(path string) bool { return w.problem(path) == "" }

func (w *watchdog) noteRepair(path, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = &control.WatchdogRepair{At: time.Now().Format(time.RFC3339), Path: path, What: what}
}

// status is the watchdog for `vmdock status`; nil before its first look.
func (w *watchdog) status() *control.WatchdogStatus {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checked.IsZero() {
		return nil
	}
	st := &control.WatchdogStatus{Paths: append([]control.PathHealth(nil), w.health...), Checked: w.checked.Format(time.RFC3339)}
	if w.last != nil {
		r := *w.last
		st.LastRepair = &r
	}
	return st
}

// portsPath binds again the published ports' host listeners that died.
func portsPath(f *forward.PortForwarder) watchPath {
	return watchPath{name: "ports", check: func(context.Context, bool) (string, string) {
		repaired, down := f.Heal()
		var problem, did string
		if len(down) > 0 {
			problem = "not listening on " + strings.Join(down, ", ")
		}
		if len(repaired) > 0 {
			what := make([]string, len(repaired))
			for i, r := range repaired {
				what[i] = r.String()
			}
			did = strings.Join(what, "; ")
		}
		return problem, did
	}}
}

// relayPath watches the stack's dials to the host for the guest: when
// they fail (or after a wake) it dials the host's loopback as the relay
// does for 10.0.2.2; remote destinations failing are theirs to answer.
// seen is the failure count at the last look, kept across rounds.
func relayPath(s *usernet.Stack, seen *int64) watchPath {
	return watchPath{name: "relay", check: func(ctx context.Context, active bool) (string, string) {
		failed := s.Stats().HostDialsFailed
		if failed == *seen && !active {
			return "", ""
		}
		*seen = failed
		if err := dialLoopback(ctx); err != nil {
			return "the host's loopback refuses the relay's dials: " + err.Error(), ""
		}
		return "", ""
	}}
}

// dialLoopback dials a listener of its own on the host's loopback.
func dialLoopback(ctx context.Context) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	return c.Close()
}

// dnsPath watches the stack's DNS server, which answers each query from
// the host's resolvers as configured at that moment.
func dnsPath(s *usernet.Stack) watchPath {
	return watchPath{name: "dns", check: func(context.Context, bool) (string, string) {
		if !s.Stats().DNSServing {
			return "the stack's DNS server stopped (see the host agent's log); `vmdock restart` starts it again", ""
		}
		return "", ""
	}}
}

// agentPath watches the guest agent session the tunnels, published ports
// and host access go through. The reconnect loop redials a session that
// ended; a session that stays open but no longer answers (after a sleep,
// a wedged transport) is closed here so that loop redials it.
func (ha *hostAgent) agentPath() watchPath {
	return watchPath{name: "agent", check: func(ctx context.Context, active bool) (string, string) {
		c, _ := ha.session.link.state()
		if c == nil || ended(c) {
			return "the guest agent session is down; reconnecting", ""
		}
		if !active {
			return "", ""
		}
		if err := askBounded(ctx, 5*time.Second, func(ctx context.Context) error { _, err := c.Info(ctx); return err }); err != nil {
			c.Close()
			return fmt.Sprintf("the guest agent did not answer (%v); reconnecting", err), "closed the unanswering guest agent session for a new one"
		}
		return "", ""
	}}
}

// watchPaths are the paths of the running instance.
func (ha *hostAgent) watchPaths() []watchPath {
	ha.mu.Lock()
	defer ha.mu.Unlock()
	paths := []watchPath{}
	if ha.run.tunnels != nil {
		paths = append(paths, portsPath(ha.run.tunnels.forwarder))
	}
	paths = append(paths, ha.agentPath())
	if n := ha.run.net; n != nil {
		paths = append(paths, relayPath(n.stack, &ha.watch.relaySeen), dnsPath(n.stack))
	}
	return paths
}

// runWatchdog runs the watchdog for as long as the instance runs.
func (ha *hostAgent) runWatchdog(ctx context.Context) {
	if ha.watch.dog == nil {
		return
	}
	t := time.NewTicker(watchdogEvery)
	defer t.Stop()
	ha.watch.dog.run(ctx, t.C, ha.idle.monitor.Paused, ha.watchPaths)
}
