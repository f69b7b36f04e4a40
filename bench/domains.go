package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/vmdock/vmdock/dockerhost/engineapi"
	"github.com/vmdock/vmdock/network/domains"
)

// The domains section puts the same GET / to one container
// through three paths side by side: the container-domains router
// (http://<name>.vmdock.localhost:<httpPort>/), the agent tunnel the router
// rides on (a stream the host agent dials to the container's address in
// the guest, as the router's proxy does, with nothing in front of it), and
// the published port (-p) the port forwarder serves, on its direct path
// where the VM's network has one. The target: the router at least
// DomainsTarget times the tunnel's requests per second.

// DomainsTarget is the least router/tunnel ratio of requests per second
// the domains section accepts.
const DomainsTarget = 0.8

// domainsConns is how many keep-alive clients send requests in parallel
// on each path.
const domainsConns = 4

// domainsContainer is the section's container's name, and so its domain
// <domainsContainer>.vmdock.localhost (another profile: .<profile>.).
const domainsContainer = "vmdock-bench-domains"

// domainsImage is the test image (hack/testimage), loaded by `make bench`
// without a registry; its /echo-server answers GET / on :80 with okBody.
const (
	domainsImage  = "vmdock-test:latest"
	domainsOKBody = "vmdock-test-ok\n"
)

// DomainRoute is how the router serves one container.
type DomainRoute struct {
	Name      string // <container>.vmdock.localhost
	HTTPAddr  string // host:port the router listens on for http
	GuestAddr string // ip:port of the container inside the guest
	Problem   string // why the router cannot proxy the name ("" when it can)
}

// domainsRounds is how often each path gets its turn, and for how long;
// warmUp is one unmeasured turn first (connections opened, and under TCG
// the code paths translated).
func (r *runner) domainsRounds() (rounds int, each, warmUp time.Duration) {
	if r.opt.Quick {
		return 3, 2 * time.Second, time.Second
	}
	return 5, 5 * time.Second, 2 * time.Second
}

// domainPath is one way to the container.
type domainPath struct {
	variant string
	url     string
	client  *http.Client
	note    string
}

func (r *runner) domains(ctx context.Context) error {
	if err := r.domainsAvailable(); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("pick a port: %w", err)
	}
	docker := dockerAPI{api: engineapi.Unix(r.env.DockerSocket)}
	defer docker.api.CloseIdleConnections()
	// A leftover of an interrupted run would hold the name.
	if err := docker.remove(ctx, domainsContainer); err != nil {
		return err
	}
	// Published on the guest's wildcard: that is the port the forwarder
	// can serve on QEMU's direct path (a guest loopback port always goes
	// through the agent tunnel, which the tunnel row measures already).
	id, err := docker.runContainer(ctx, domainsContainer, domainsImage, map[string]string{domains.LabelHTTPPort: "80"}, 80, port)
	if err != nil {
		return fmt.Errorf("start the web container (`make bench` loads %s; without it: docker --context vmdock load -i the output of go run ./hack/testimage): %w", domainsImage, err)
	}
	defer docker.remove(context.WithoutCancel(ctx), id) //nolint:errcheck // best effort

	rt, err := waitRoute(ctx, r.env.DomainRoute, id, 60*time.Second)
	if err != nil {
		return err
	}
	paths := r.domainPaths(rt, port)
	defer func() {
		for _, p := range paths {
			p.client.CloseIdleConnections()
		}
	}()
	for _, p := range paths {
		if err := waitHTTP(ctx, p.client, p.url, 60*time.Second); err != nil {
			return fmt.Errorf("%s: %w", p.variant, err)
		}
	}
	// Named after the path the published port ended up on, as in ports.
	paths[2].variant = "published port: " + r.waitPath(ctx, port)

	loads, errs, err := r.loadDomainPaths(ctx, paths)
	if err != nil {
		return err
	}
	r.reportDomains(paths, loads)
	return errors.Join(errs...)
}

// domainsAvailable says why the instance has no container domains to
// measure, if it has none.
func (r *runner) domainsAvailable() error {
	switch {
	case r.env.ContainerdSocket != "" || r.env.DockerSocket == "":
		return fmt.Errorf("container domains are built for the docker runtime only")
	case r.env.DomainRoute == nil:
		return fmt.Errorf("container domains are off for this instance (domains.enabled: false)")
	case r.env.DialGuest == nil:
		return fmt.Errorf("no agent tunnel to measure the router against")
	}
	return nil
}

// domainPaths are the three ways to the container at rt, published on
// the host's port: the agent tunnel, the router and the published port.
func (r *runner) domainPaths(rt DomainRoute, port int) []domainPath {
	published := fmt.Sprintf("127.0.0.1:%d", port)
	return []domainPath{
		{variant: "agent tunnel", url: "http://" + rt.GuestAddr + "/",
			client: keepAliveClient(func(ctx context.Context) (net.Conn, error) { return r.env.DialGuest(ctx, rt.GuestAddr) }),
			note:   "a stream to " + rt.GuestAddr + " dialed by the host agent over the agent channel, as the router's proxy dials"},
		{variant: "router", url: "http://" + net.JoinHostPort(rt.Name, portOf(rt.HTTPAddr)) + "/",
			client: keepAliveClient(tcpTo(rt.HTTPAddr)), note: "http://" + net.JoinHostPort(rt.Name, portOf(rt.HTTPAddr)) + "/ on " + rt.HTTPAddr},
		{variant: "published port", url: "http://" + published + "/", client: keepAliveClient(tcpTo(published)), note: fmt.Sprintf("%s (-p %d:80, the guest's wildcard) -> container :80", published, port)},
	}
}

// loadDomainPaths warms every path up, then loads them in rounds; a path
// that fails is left out of the later rounds and its error returned in
// errs. err is a warm-up failure or the cancel.
func (r *runner) loadDomainPaths(ctx context.Context, paths []domainPath) (loads [][]loadResult, errs []error, err error) {
	rounds, each, warm := r.domainsRounds()
	for _, p := range paths {
		if _, err := httpLoad(ctx, p.client, p.url, domainsConns, warm, domainsOKBody); err != nil {
			return nil, nil, fmt.Errorf("%s warm-up: %w", p.variant, err)
		}
	}
	loads = make([][]loadResult, len(paths))
	failed := make([]bool, len(paths))
	for round := range rounds {
		// Each round starts with another path, so neither a slow start
		// nor a burst of host noise lands on one path alone.
		for k := range paths {
			i := (round + k) % len(paths)
			if failed[i] {
				continue
			}
			res, err := httpLoad(ctx, paths[i].client, paths[i].url, domainsConns, each, domainsOKBody)
			if err != nil {
				if ctx.Err() != nil {
					return nil, nil, ctx.Err()
				}
				errs = append(errs, fmt.Errorf("%s: %w", paths[i].variant, err))
				failed[i] = true
				continue
			}
			loads[i] = append(loads[i], res)
		}
	}
	return loads, errs, nil
}

// reportDomains adds each measured path's row and the comparison check.
func (r *runner) reportDomains(paths []domainPath, loads [][]loadResult) {
	var stats []pathStats
	for i, p := range paths {
		if len(loads[i]) == 0 {
			continue
		}
		s := summarize(loads[i])
		s.variant, s.note = p.variant, fmt.Sprintf("%s; %d requests in %d rounds", p.note, s.requests, len(loads[i]))
		stats = append(stats, s)
	}
	for _, res := range domainsRows(stats) {
		r.rep.Add(res)
	}
	if c, ok := domainsCheck(stats); ok {
		r.rep.Checks = append(r.rep.Checks, c)
	}
}

// waitRoute waits until the router has a name for the container: names
// follow docker's events, so a new container takes a moment to appear.
func waitRoute(ctx context.Context, find func(ctx context.Context, containerID string) (DomainRoute, bool, error), id string, timeout time.Duration) (DomainRoute, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		rt, ok, err := find(ctx, id)
		switch {
		case err != nil:
			last = err
		case ok && rt.Problem != "":
			return rt, fmt.Errorf("the router cannot route %s: %s", rt.Name, rt.Problem)
		case ok && rt.HTTPAddr == "":
			last = fmt.Errorf("the router has %s but listens on no http port (is domains.httpPort free?)", rt.Name)
		case ok:
			return rt, nil
		default:
			last = fmt.Errorf("no name for container %.12s yet", id)
		}
		if time.Now().After(deadline) {
			return rt, fmt.Errorf("router: %w (waited %s)", last, timeout)
		}
		select {
		case <-ctx.Done():
			return rt, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitHTTP waits until url answers okBody through client: a published
// port is forwarded once the port watch has seen it.
func waitHTTP(ctx context.Context, client *http.Client, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := getOnce(cctx, client, url, domainsOKBody)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET %s did not answer within %s: %w", url, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tcpTo dials addr whatever the request's URL says: the router is asked
// for <name>.vmdock.localhost, which only browsers resolve to loopback.
func tcpTo(addr string) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
}

// keepAliveClient is an HTTP/1.1 client whose connections dial opens;
// it keeps up to domainsConns of them open between requests.
func keepAliveClient(dial func(ctx context.Context) (net.Conn, error)) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		Proxy:               nil, // never a proxy from the environment: this measures vmdock's paths
		DisableCompression:  true,
		MaxIdleConns:        domainsConns,
		MaxIdleConnsPerHost: domainsConns,
		MaxConnsPerHost:     domainsConns,
		IdleConnTimeout:     time.Minute,
	}}
}

func portOf(hostport string) string {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return ""
	}
	return p
}

// loadResult is one round on one path.
type loadResult struct {
	latencies []time.Duration // one per request that answered okBody
	elapsed   time.Duration   // from the first request to the last answer
}

// httpLoad runs conns clients that GET url one request after another, each
// until d has passed, through client (sharing its kept-alive connections).
// A request that fails or answers anything but 200 and want ends the round
// with its error.
func httpLoad(ctx context.Context, client *http.Client, url string, conns int, d time.Duration, want string) (loadResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		all  []time.Duration
		ferr error
		wg   sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(end) && ctx.Err() == nil {
				took, err := getOnce(ctx, client, url, want)
				if err != nil {
					mu.Lock()
					if ferr == nil && ctx.Err() == nil {
						ferr = err
					}
					mu.Unlock()
					cancel()
					break
				}
				mine = append(mine, took)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res := loadResult{latencies: all, elapsed: time.Since(start)}
	if ferr != nil {
		return res, ferr
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if len(all) == 0 {
		return res, fmt.Errorf("GET %s: no request finished in %s", url, d)
	}
	return res, nil
}

// getOnce sends one GET and reads the whole answer, which must be 200 and
// want; it returns the time to the answer's last byte.
func getOnce(ctx context.Context, client *http.Client, url, want string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("GET %s: read: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK || string(body) != want {
		return 0, fmt.Errorf("GET %s: %s %q, want 200 %q", url, resp.Status, truncateBody(body), want)
	}
	return took, nil
}

func truncateBody(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}

// pathStats is one path's rounds folded together.
type pathStats struct {
	variant  string
	note     string
	requests int
	rps      float64 // requests over the rounds' summed time
	p50, p99 time.Duration
}

// summarize folds a path's rounds: requests per second over all rounds'
// time, and the percentiles of every request's latency.
func summarize(rounds []loadResult) pathStats {
	var all []time.Duration
	var elapsed time.Duration
	for _, l := range rounds {
		all = append(all, l.latencies...)
		elapsed += l.elapsed
	}
	s := pathStats{requests: len(all), p50: Percentile(all, 50), p99: Percentile(all, 99)}
	if elapsed > 0 {
		s.rps = float64(len(all)) / elapsed.Seconds()
	}
	return s
}

// domainsRows are the section's rows, metric by metric, the paths side by
// side in the order given (the first, the agent tunnel, is the baseline).
func domainsRows(stats []pathStats) []Result {
	conns := strconv.Itoa(domainsConns) + " conns"
	var out []Result
	for _, s := range stats {
		out = append(out, Result{Section: "domains", Metric: "GET / requests/s, " + conns, Variant: s.variant, Value: s.rps, Unit: "req/s", Better: Higher, Note: s.note})
	}
	for _, m := range []struct {
		name string
		v    func(pathStats) time.Duration
	}{{"p50", func(s pathStats) time.Duration { return s.p50 }}, {"p99", func(s pathStats) time.Duration { return s.p99 }}} {
		for _, s := range stats {
			out = append(out, Result{Section: "domains", Metric: "GET / " + m.name + ", " + conns, Variant: s.variant, Value: ms(m.v(s)), Unit: "ms", Better: Lower})
		}
	}
	return out
}

// domainsCheck is the domains section's target: the router's requests per second
// against the agent tunnel's. ok is false when either path has no rounds.
func domainsCheck(stats []pathStats) (Check, bool) {
	var tunnel, router *pathStats
	for i := range stats {
		switch stats[i].variant {
		case "agent tunnel":
			tunnel = &stats[i]
		case "router":
			router = &stats[i]
		}
	}
	if tunnel == nil || router == nil || tunnel.rps <= 0 {
		return Check{}, false
	}
	return NewCheck("domains", "router / agent tunnel, requests/s", router.rps/tunnel.rps, DomainsTarget), true
}
