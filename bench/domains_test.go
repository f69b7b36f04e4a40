package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// okServer answers GET / with the test image's body and counts the
// connections it accepted.
func okServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	if h == nil {
		h = func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, domainsOKBody) }
	}
	srv := httptest.NewUnstartedServer(h)
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func TestHTTPLoadKeepsConnectionsAlive(t *testing.T) {
	srv, conns := okServer(t, nil)
	addr := srv.Listener.Addr().String()
	// The URL names a host nobody resolves, as the router's does: the
	// client dials addr whatever the URL says.
	c := keepAliveClient(tcpTo(addr))
	defer c.CloseIdleConnections()
	res, err := httpLoad(context.Background(), c, "http://web.vmdock.localhost:1/", domainsConns, 300*time.Millisecond, domainsOKBody)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.latencies) < 10 {
		t.Errorf("only %d requests in 300ms against a loopback server", len(res.latencies))
	}
	if res.elapsed < 300*time.Millisecond {
		t.Errorf("elapsed %v, shorter than the round", res.elapsed)
	}
	// Kept alive, each client reuses its connection (a loaded machine
	// may make one client open a second); not kept alive, each request
	// opens one, and there are at least 10.
	if n := conns.Load(); n > 2*domainsConns {
		t.Errorf("%d connections for %d keep-alive clients and %d requests: not kept alive", n, domainsConns, len(res.latencies))
	}
	for _, l := range res.latencies {
		if l <= 0 {
			t.Fatalf("latency %v", l)
		}
	}
}

func TestHTTPLoadSendsTheHostAsked(t *testing.T) {
	var host atomic.Value
	srv, _ := okServer(t, func(w http.ResponseWriter, r *http.Request) {
		host.Store(r.Host)
		io.WriteString(w, domainsOKBody)
	})
	c := keepAliveClient(tcpTo(srv.Listener.Addr().String()))
	defer c.CloseIdleConnections()
	if _, err := httpLoad(context.Background(), c, "http://web.vmdock.localhost:8080/", 1, 10*time.Millisecond, domainsOKBody); err != nil {
		t.Fatal(err)
	}
	if got := host.Load(); got != "web.vmdock.localhost:8080" {
		t.Errorf("Host = %v, want the router's name", got)
	}
}

func TestHTTPLoadFailsOnAWrongAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want string
	}{
		{"router's unknown-name page", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "No such container name", http.StatusNotFound)
		}, "404"},
		{"other body", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") }, `"hello\n"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := okServer(t, tc.h)
			c := keepAliveClient(tcpTo(srv.Listener.Addr().String()))
			defer c.CloseIdleConnections()
			start := time.Now()
			_, err := httpLoad(context.Background(), c, srv.URL+"/", domainsConns, 5*time.Second, domainsOKBody)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
			if time.Since(start) > 2*time.Second {
				t.Error("a failed request did not end the round")
			}
		})
	}
}

func TestHTTPLoadDialError(t *testing.T) {
	c := keepAliveClient(func(context.Context) (net.Conn, error) { return nil, errors.New("no guest") })
	if _, err := httpLoad(context.Background(), c, "http://x/", 2, time.Second, domainsOKBody); err == nil || !strings.Contains(err.Error(), "no guest") {
		t.Fatalf("err = %v", err)
	}
}

func TestHTTPLoadCancelled(t *testing.T) {
	srv, _ := okServer(t, nil)
	c := keepAliveClient(tcpTo(srv.Listener.Addr().String()))
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := httpLoad(ctx, c, srv.URL+"/", 2, 10*time.Second, domainsOKBody); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
}

func ds(ms ...int) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestSummarize(t *testing.T) {
	// 200 requests over 2 s in two rounds: 100/s whatever the rounds' sizes.
	var a, b []time.Duration
	for i := 1; i <= 150; i++ {
		a = append(a, time.Duration(i)*time.Millisecond)
	}
	for i := 151; i <= 200; i++ {
		b = append(b, time.Duration(i)*time.Millisecond)
	}
	s := summarize([]loadResult{{latencies: a, elapsed: 1500 * time.Millisecond}, {latencies: b, elapsed: 500 * time.Millisecond}})
	if s.requests != 200 || s.rps != 100 {
		t.Errorf("requests %d, rps %v; want 200, 100", s.requests, s.rps)
	}
	if s.p50 != 100*time.Millisecond || s.p99 != 198*time.Millisecond {
		t.Errorf("p50 %v p99 %v; want 100ms 198ms (nearest rank over both rounds)", s.p50, s.p99)
	}
	if z := summarize(nil); z.rps != 0 || z.requests != 0 {
		t.Errorf("no rounds: %+v", z)
	}
}

func TestDomainsRowsAndRatios(t *testing.T) {
	stats := []pathStats{
		{variant: "agent tunnel", rps: 400, p50: 10 * time.Millisecond, p99: 40 * time.Millisecond},
		{variant: "router", rps: 300, p50: 12500 * time.Microsecond, p99: 50 * time.Millisecond},
		{variant: "published port: direct path", rps: 800, p50: 5 * time.Millisecond, p99: 20 * time.Millisecond},
	}
	rep := &Report{}
	for _, r := range domainsRows(stats) {
		rep.Add(r)
	}
	rep.ComputeRatios()
	if len(rep.Results) != 9 {
		t.Fatalf("%d rows, want 3 metrics x 3 paths", len(rep.Results))
	}
	want := []struct {
		metric, variant string
		value, ratio    float64
	}{
		{"GET / requests/s, 4 conns", "agent tunnel", 400, 1},
		{"GET / requests/s, 4 conns", "router", 300, 0.75},
		{"GET / requests/s, 4 conns", "published port: direct path", 800, 2},
		{"GET / p50, 4 conns", "agent tunnel", 10, 1},
		{"GET / p50, 4 conns", "router", 12.5, 0.8},
		{"GET / p50, 4 conns", "published port: direct path", 5, 2},
		{"GET / p99, 4 conns", "agent tunnel", 40, 1},
		{"GET / p99, 4 conns", "router", 50, 0.8},
		{"GET / p99, 4 conns", "published port: direct path", 20, 2},
	}
	for i, w := range want {
		got := rep.Results[i]
		if got.Section != "domains" || got.Metric != w.metric || got.Variant != w.variant || got.Value != w.value || got.Ratio != w.ratio {
			t.Errorf("row %d = %s/%s/%s %v ratio %v; want %s/%s %v ratio %v", i, got.Section, got.Metric, got.Variant, got.Value, got.Ratio, w.metric, w.variant, w.value, w.ratio)
		}
	}
}

func TestDomainsCheck(t *testing.T) {
	for _, tc := range []struct {
		router, tunnel float64
		pass           bool
		verdict        string
	}{
		{300, 400, false, "0.75x (at least 0.80x): below target"},
		{320, 400, true, "0.80x (at least 0.80x): PASS"},
		{450, 400, true, "1.12x (at least 0.80x): PASS"},
	} {
		c, ok := domainsCheck([]pathStats{{variant: "agent tunnel", rps: tc.tunnel}, {variant: "router", rps: tc.router}, {variant: "published port: direct path", rps: 1}})
		if !ok || c.Pass != tc.pass || c.Target != DomainsTarget {
			t.Errorf("%v/%v: %+v ok %v", tc.router, tc.tunnel, c, ok)
		}
		want := "target: domains router / agent tunnel, requests/s = " + tc.verdict
		if c.String() != want {
			t.Errorf("line %q, want %q", c.String(), want)
		}
	}
	if _, ok := domainsCheck([]pathStats{{variant: "router", rps: 300}}); ok {
		t.Error("a check without the tunnel's rounds")
	}
	if _, ok := domainsCheck([]pathStats{{variant: "agent tunnel", rps: 0}, {variant: "router", rps: 300}}); ok {
		t.Error("a check against a tunnel of 0 requests/s")
	}
}

func TestWriteTablePrintsChecks(t *testing.T) {
	rep := &Report{Skipped: []string{"cost: later"}}
	for _, r := range domainsRows([]pathStats{{variant: "agent tunnel", rps: 400}, {variant: "router", rps: 380}}) {
		rep.Add(r)
	}
	c, _ := domainsCheck([]pathStats{{variant: "agent tunnel", rps: 400}, {variant: "router", rps: 380}})
	rep.Checks = append(rep.Checks, c)
	rep.ComputeRatios()
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"domains  GET / requests/s, 4 conns  router        380    req/s  0.95x",
		"target: domains router / agent tunnel, requests/s = 0.95x (at least 0.80x): PASS\nskipped: cost: later\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestWaitRoute(t *testing.T) {
	calls := 0
	find := func(_ context.Context, id string) (DomainRoute, bool, error) {
		calls++
		switch {
		case id != "abc":
			return DomainRoute{}, false, fmt.Errorf("asked for %q", id)
		case calls == 1:
			return DomainRoute{}, false, errors.New("router not up yet")
		case calls == 2:
			return DomainRoute{}, false, nil // names follow docker's events
		case calls == 3:
			return DomainRoute{Name: "web.vmdock.localhost"}, true, nil // no http port yet
		}
		return DomainRoute{Name: "web.vmdock.localhost", HTTPAddr: "127.0.0.1:8080", GuestAddr: "172.17.0.2:80"}, true, nil
	}
	rt, err := waitRoute(context.Background(), find, "abc", 10*time.Second)
	if err != nil || rt.GuestAddr != "172.17.0.2:80" || calls != 4 {
		t.Fatalf("%+v %v after %d calls", rt, err, calls)
	}

	problem := func(context.Context, string) (DomainRoute, bool, error) {
		return DomainRoute{Name: "web.vmdock.localhost", Problem: "several exposed ports"}, true, nil
	}
	if _, err := waitRoute(context.Background(), problem, "abc", 10*time.Second); err == nil || !strings.Contains(err.Error(), "several exposed ports") {
		t.Errorf("problem: err = %v", err)
	}

	never := func(context.Context, string) (DomainRoute, bool, error) { return DomainRoute{}, false, nil }
	if _, err := waitRoute(context.Background(), never, "abcdef0123456789", 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no name for container abcdef012345") {
		t.Errorf("timeout: err = %v", err)
	}
}

func TestDomainsNeedsDockerAndRouter(t *testing.T) {
	for _, tc := range []struct {
		env  Env
		want string
	}{
		{Env{ContainerdSocket: "/x"}, "docker runtime only"},
		{Env{}, "docker runtime only"},
		{Env{DockerSocket: "/x", DialGuest: func(context.Context, string) (net.Conn, error) { return nil, nil }}, "domains.enabled: false"},
		{Env{DockerSocket: "/x", DomainRoute: func(context.Context, string) (DomainRoute, bool, error) { return DomainRoute{}, false, nil }}, "no agent tunnel"},
	} {
		r := &runner{env: tc.env, rep: &Report{}}
		if err := r.domains(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

func TestDomainsIsASection(t *testing.T) {
	secs, err := ParseSections("domains")
	if err != nil || len(secs) != 1 || secs[0] != "domains" {
		t.Fatalf("%v %v", secs, err)
	}
}
