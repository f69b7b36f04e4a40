package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hostRecorder is an okServer that keeps the Host header of the last
// request.
func hostRecorder(t *testing.T) (addr string, host *atomic.Value) {
	t.Helper()
	host = &atomic.Value{}
	srv, _ := okServer(t, func(w http.ResponseWriter, r *http.Request) {
		host.Store(r.Host)
		io.WriteString(w, domainsOKBody)
	})
	return srv.Listener.Addr().String(), host
}

// The three paths reach their own ends: the tunnel through DialGuest to
// the container's guest address, the router on its listen address asked
// for the container's name, the published port on loopback.
func TestDomainPathsReachTheirEnds(t *testing.T) {
	guestSrv, guestHost := hostRecorder(t)
	routerSrv, routerHost := hostRecorder(t)
	publishedSrv, publishedHost := hostRecorder(t)
	_, portStr, _ := net.SplitHostPort(publishedSrv)
	port, _ := strconv.Atoi(portStr)
	var asked atomic.Value
	r := &runner{env: Env{DialGuest: func(ctx context.Context, addr string) (net.Conn, error) {
		asked.Store(addr)
		return (&net.Dialer{}).DialContext(ctx, "tcp", guestSrv)
	}}}
	rt := DomainRoute{Name: "web.vmdock.localhost", HTTPAddr: routerSrv, GuestAddr: "172.17.0.2:80"}
	paths := r.domainPaths(rt, port)
	defer func() {
		for _, p := range paths {
			p.client.CloseIdleConnections()
		}
	}()
	_, routerPort, _ := net.SplitHostPort(routerSrv)
	want := []struct {
		variant, url string
		host         *atomic.Value
		hostWant     string
	}{
		{"agent tunnel", "http://172.17.0.2:80/", guestHost, "172.17.0.2:80"},
		{"router", "http://web.vmdock.localhost:" + routerPort + "/", routerHost, "web.vmdock.localhost:" + routerPort},
		{"published port", "http://127.0.0.1:" + portStr + "/", publishedHost, "127.0.0.1:" + portStr},
	}
	if len(paths) != len(want) {
		t.Fatalf("%d paths, want %d", len(paths), len(want))
	}
	for i, w := range want {
		p := paths[i]
		if p.variant != w.variant || p.url != w.url || p.note == "" {
			t.Errorf("path %d = %q %q (note %q), want %q %q", i, p.variant, p.url, p.note, w.variant, w.url)
		}
		if err := waitHTTP(t.Context(), p.client, p.url, time.Second); err != nil {
			t.Fatalf("%s: %v", p.variant, err)
		}
		if got := w.host.Load(); got != w.hostWant {
			t.Errorf("%s: the server was asked for %v, want %s", p.variant, got, w.hostWant)
		}
	}
	if got := asked.Load(); got != rt.GuestAddr {
		t.Errorf("the tunnel dialed %v in the guest, want %s", got, rt.GuestAddr)
	}
}

func TestWaitHTTPGivesUp(t *testing.T) {
	srv, _ := okServer(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "No such container name", http.StatusNotFound)
	})
	c := keepAliveClient(tcpTo(srv.Listener.Addr().String()))
	defer c.CloseIdleConnections()
	err := waitHTTP(t.Context(), c, srv.URL+"/", 0)
	if err == nil || !strings.Contains(err.Error(), "did not answer within") || !strings.Contains(err.Error(), "404") {
		t.Errorf("waitHTTP of a 404 = %v, want a timeout naming the answer", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := waitHTTP(ctx, c, srv.URL+"/", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("waitHTTP with an ended context = %v, want context.Canceled", err)
	}
}

// A path that fails its warm-up ends the section before any round.
func TestLoadDomainPathsStopsOnAFailedWarmUp(t *testing.T) {
	good, _ := okServer(t, nil)
	bad, _ := okServer(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "bad gateway", http.StatusBadGateway) })
	paths := []domainPath{
		{variant: "agent tunnel", url: good.URL + "/", client: keepAliveClient(tcpTo(good.Listener.Addr().String()))},
		{variant: "router", url: bad.URL + "/", client: keepAliveClient(tcpTo(bad.Listener.Addr().String()))},
	}
	r := &runner{opt: Options{Quick: true}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	loads, errs, err := r.loadDomainPaths(ctx, paths)
	if err == nil || !strings.HasPrefix(err.Error(), "router warm-up: ") || !strings.Contains(err.Error(), "502") {
		t.Errorf("err = %v, want the router's warm-up failure", err)
	}
	if loads != nil || errs != nil {
		t.Errorf("loads %v errs %v after a failed warm-up, want none", loads, errs)
	}
}

// Each measured path gets its rows and the note says how much was
// measured; a path without rounds is left out, and the check needs both
// the tunnel and the router.
func TestReportDomains(t *testing.T) {
	paths := []domainPath{{variant: "agent tunnel", note: "tunnel"}, {variant: "router", note: "router"}, {variant: "published port: tunnel", note: "published"}}
	round := loadResult{latencies: ds(10, 20, 30), elapsed: time.Second}
	r := &runner{rep: &Report{}}
	r.reportDomains(paths, [][]loadResult{{round, round}, {round}, nil})
	if len(r.rep.Results) != 6 {
		t.Fatalf("%d rows, want 3 metrics x 2 measured paths", len(r.rep.Results))
	}
	for _, res := range r.rep.Results {
		if res.Variant == "published port: tunnel" {
			t.Errorf("a row for the unmeasured path: %+v", res)
		}
	}
	if n := r.rep.Results[0].Note; n != "tunnel; 6 requests in 2 rounds" {
		t.Errorf("tunnel note %q", n)
	}
	if r.rep.Results[0].Value != 3 || r.rep.Results[1].Value != 3 {
		t.Errorf("requests/s %v and %v, want 3 (6 over 2 s, 3 over 1 s)", r.rep.Results[0].Value, r.rep.Results[1].Value)
	}
	if len(r.rep.Checks) != 1 || !r.rep.Checks[0].Pass {
		t.Errorf("checks %+v, want one passing (router as fast as the tunnel)", r.rep.Checks)
	}

	r = &runner{rep: &Report{}}
	r.reportDomains(paths, [][]loadResult{{round}, nil, {round}})
	if len(r.rep.Checks) != 0 || len(r.rep.Results) != 6 {
		t.Errorf("without router rounds: %d rows, checks %+v; want 6 rows and no check", len(r.rep.Results), r.rep.Checks)
	}
}

func TestPortOf(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.1:8080": "8080", "[::1]:443": "443", "no port": ""} {
		if got := portOf(in); got != want {
			t.Errorf("portOf(%q) = %q, want %q", in, got, want)
		}
	}
}
