package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/vmdock/vmdock/bench/probe"
)

// The network section's paths, per instance: a published port on the VM's
// network (the direct path: QEMU's hostfwd on slirp, a dial inside the
// host agent's stack on gvisor), the same through the agent tunnel, and a
// download from the host's loopback through host access.
const (
	netDirect   = "direct"
	netTunnel   = "tunnel"
	netDownload = "download"
)

// netStackGvisor is the host agent's own stack, the one the section
// compares against the VM type's own.
const netStackGvisor = "gvisor"

// netSide is one instance the network section measures.
type netSide struct {
	r      *runner
	stack  string
	direct string // host address of the wildcard guest server's forward
	tunnel string // host address of the loopback-only one (always tunnelled)
	path   string // the variant name of what the direct port ended up on
	stops  []func()
	// samples are each round's value per path: MB/s for streams and the
	// download, ms for p50s (key: path, or path+" p50").
	samples map[string][]float64
}

// network measures the published port's stream and connect+echo p50 on
// the direct path and through the agent tunnel, and a download from the
// host's loopback through host access, on this instance and on the one
// --versus names, rounds interleaved so both see the same host load.
func (r *runner) network(ctx context.Context) error {
	if err := r.needHelper(); err != nil {
		return err
	}
	sides, err := r.networkSides(ctx)
	defer func() {
		for _, s := range sides {
			for _, stop := range s.stops {
				stop()
			}
		}
	}()
	if err != nil {
		return err
	}
	n := r.streamBytes()
	port, stopServer, err := serveDownload(n)
	if err != nil {
		return err
	}
	defer stopServer()
	rounds := 5
	if r.opt.Quick {
		rounds = 3
	}
	for round := range rounds {
		for _, s := range sides {
			if err := s.round(ctx, n, port); err != nil {
				return fmt.Errorf("round %d on the %s instance: %w", round+1, s.stack, err)
			}
		}
	}
	rows, checks := networkRows(sides, n)
	for _, res := range rows {
		r.rep.Add(res)
	}
	r.rep.Checks = append(r.rep.Checks, checks...)
	return nil
}

// networkSides prepares this instance and the --versus one: the helper in
// a share, an echo server on the guest's wildcard and one on its loopback,
// both forwarded. The VM type's own stack comes first: it is the baseline.
func (r *runner) networkSides(ctx context.Context) ([]*netSide, error) {
	runners := []*runner{r}
	if r.opt.Versus != nil {
		peer := &runner{env: *r.opt.Versus, opt: r.opt, rep: r.rep, native: nativeDir}
		if err := peer.installHelper(); err != nil {
			return nil, fmt.Errorf("the --versus instance: %w", err)
		}
		runners = append(runners, peer)
	}
	var sides []*netSide
	for _, pr := range runners {
		s := &netSide{r: pr, stack: pr.env.NetStack, samples: map[string][]float64{}}
		sides = append(sides, s)
		if err := s.serve(ctx); err != nil {
			return sides, fmt.Errorf("the %s instance: %w", s.stack, err)
		}
	}
	slices.SortStableFunc(sides, func(a, b *netSide) int {
		return boolInt(a.stack == netStackGvisor) - boolInt(b.stack == netStackGvisor)
	})
	return sides, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// serve starts the side's two guest echo servers and waits for their
// forwards and for the wildcard one's direct path.
func (s *netSide) serve(ctx context.Context) error {
	for _, bind := range []string{"0.0.0.0", "127.0.0.1"} {
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("pick a port: %w", err)
		}
		stop, err := s.r.guestServer(ctx, bind, port)
		if err != nil {
			return err
		}
		s.stops = append(s.stops, stop)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := waitForwarded(ctx, addr, 60*time.Second); err != nil {
			return err
		}
		if bind == "0.0.0.0" {
			s.direct, s.path = addr, s.r.waitPath(ctx, port)
		} else {
			s.tunnel = addr
		}
	}
	return nil
}

// round takes one sample of every path; the download server listens on
// the host's loopback port downloadPort.
func (s *netSide) round(ctx context.Context, n int64, downloadPort int) error {
	for _, p := range []struct{ path, addr string }{{netDirect, s.direct}, {netTunnel, s.tunnel}} {
		d, err := probe.EchoThroughput(ctx, probe.TCPDialer(p.addr), n)
		if err != nil {
			return err
		}
		s.samples[p.path] = append(s.samples[p.path], float64(n)/1e6/d.Seconds())
		lat, err := probe.EchoLatency(ctx, probe.TCPDialer(p.addr), 1, 20, 64)
		if err != nil {
			return err
		}
		s.samples[p.path+" p50"] = append(s.samples[p.path+" p50"], ms(Percentile(lat, 50)))
	}
	var got struct{ Bytes, Seconds float64 }
	url := "http://" + net.JoinHostPort(s.r.env.HostAccessIP, strconv.Itoa(downloadPort)) + "/"
	if err := s.r.helperJSON(ctx, &got, "download", "-addr", url); err != nil {
		return err
	}
	if int64(got.Bytes) != n || got.Seconds <= 0 {
		return fmt.Errorf("download: %.0f of %d bytes in %.3f s", got.Bytes, n, got.Seconds)
	}
	s.samples[netDownload] = append(s.samples[netDownload], got.Bytes/1e6/got.Seconds)
	return nil
}

// serveDownload serves n random bytes on a port of the host's loopback.
func serveDownload(n int64) (port int, stop func(), err error) {
	body := make([]byte, n)
	rand.Read(body)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return ln.Addr().(*net.TCPAddr).Port, func() { srv.Close() }, nil
}

// networkRows are the medians of the sides' samples, baseline side first
// for each metric, and the targets when a gvisor side runs beside
// another stack: its stream at least the other's, its p50 at most 1.1x.
func networkRows(sides []*netSide, n int64) ([]Result, []Check) {
	stream := fmt.Sprintf("published port echo stream %dMB", n>>20)
	p50 := "published port connect+echo p50, 1 conn"
	download := fmt.Sprintf("download %dMB from the host's loopback (host access)", n>>20)
	var rows []Result
	add := func(metric, key, variant, unit string, better Better) {
		for _, s := range sides {
			if v := s.samples[key]; len(v) > 0 {
				rows = append(rows, Result{Section: "network", Metric: metric, Variant: s.stack + ": " + variantFor(s, variant),
					Value: median(v), Unit: unit, Better: better, Note: fmt.Sprintf("median of %d rounds", len(v))})
			}
		}
	}
	add(stream, netDirect, netDirect, "MB/s", Higher)
	add(stream, netTunnel, netTunnel, "MB/s", Higher)
	add(p50, netDirect+" p50", netDirect, "ms", Lower)
	add(p50, netTunnel+" p50", netTunnel, "ms", Lower)
	add(download, netDownload, netDownload, "MB/s", Higher)
	return rows, networkChecks(sides)
}

// variantFor names a path of side s in a row.
func variantFor(s *netSide, path string) string {
	switch path {
	case netDirect:
		return s.path
	case netTunnel:
		return "agent tunnel"
	}
	return "guest->host (" + s.r.env.HostAccessIP + ")"
}

func networkChecks(sides []*netSide) []Check {
	if len(sides) != 2 || sides[0].stack == netStackGvisor || sides[1].stack != netStackGvisor {
		return nil
	}
	own, gv := sides[0].samples, sides[1].samples
	if len(own[netDirect]) == 0 || len(gv[netDirect]) == 0 || len(own[netDirect+" p50"]) == 0 || len(gv[netDirect+" p50"]) == 0 {
		return nil
	}
	name := sides[0].stack
	return []Check{
		NewCheck("network", "gvisor/"+name+" direct path stream", ratio(median(gv[netDirect]), median(own[netDirect]), Higher), 1.0),
		// p50 at most 1.1x the other's: as a speed ratio, at least 1/1.1.
		NewCheck("network", "gvisor vs "+name+" direct path connect+echo p50 (as speed: "+name+"'s p50 / gvisor's)", ratio(median(gv[netDirect+" p50"]), median(own[netDirect+" p50"]), Lower), 1/1.1),
	}
}
