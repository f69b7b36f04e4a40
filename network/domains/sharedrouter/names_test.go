package sharedrouter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/nerdctlapi"
)

// fakeNerdctl is the guest's nerdctl as the containerd runtime's names see
// it through the exec op: the list script's output, which the test
// changes, and `nerdctl events`, which it feeds.
type fakeNerdctl struct {
	mu     sync.Mutex
	list   string
	events chan string
}

func (f *fakeNerdctl) set(list string) {
	f.mu.Lock()
	f.list = list
	f.mu.Unlock()
	f.events <- `{"Namespace":"default","Topic":"/containers/delete"}` + "\n\n"
}

func (f *fakeNerdctl) exec(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error) {
	switch {
	case argv[0] == "sh":
		f.mu.Lock()
		fmt.Fprint(stdout, f.list)
		f.mu.Unlock()
		return 0, nil
	case len(argv) > 5 && argv[3] == "image":
		fmt.Fprint(stdout, `[{"Config":{"ExposedPorts":{"80/tcp":{},"82/tcp":{}}}}]`)
		return 0, nil
	case argv[1] == "events":
		for {
			select {
			case ev := <-f.events:
				io.WriteString(stdout, ev) //nolint:errcheck
			case <-ctx.Done():
				return -1, ctx.Err()
			}
		}
	}
	return 127, nil
}

// nerdctlWeb is `nerdctl run --label dev.vmdock.http-port=80` of the test
// image (which exposes 80 and 82): its address is in its network namespace.
const nerdctlWeb = `[{"Id":"c0ffee","Name":"web","Image":"docker.io/library/vmdock-test:latest","Created":"2025-01-01T00:00:00Z",
 "State":{"Running":true},"Config":{"Labels":{"nerdctl/name":"web","dev.vmdock.http-port":"80"}},
 "NetworkSettings":{"Ports":{},"IPAddress":"10.4.0.7","Networks":{"unknown-eth0":{"IPAddress":"10.4.0.7"}}}}]`

func TestDomainsFollowNerdctlEvents(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "web saw %s", r.Host)
	}))
	defer web.Close()
	fn := &fakeNerdctl{list: nerdctlWeb, events: make(chan string)}
	home := testHome(t, "default")
	d, notes, err := startNoting(Settings{
		Profile: "default",
		Home:    home,
		Ports:   Ports{},
		Binds:   []string{"127.0.0.1"},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != "10.4.0.7:80" {
				return nil, fmt.Errorf("no container at %s", addr)
			}
			return (&net.Dialer{}).DialContext(ctx, network, web.Listener.Addr().String())
		},
		Names: nerdctlapi.New(fn.exec),
	})
	if err != nil || len(notes) != 0 {
		t.Fatalf("start: %v %q", err, notes)
	}
	defer d.Close()
	httpAddr := d.listening("http")[0].String()
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", httpAddr)
		},
	}}
	fetch := func() (int, string) {
		resp, err := c.Get("http://web.vmdock.localhost/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(what string, ok func(int, string) bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			code, body := fetch()
			if ok(code, body) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %d %q", what, code, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the name answers", func(code int, body string) bool {
		return code == 200 && body == "web saw web.vmdock.localhost"
	})
	fn.set("")
	waitFor("the removed container's name goes", func(code int, _ string) bool { return code == http.StatusNotFound })
}

// flakySource fails its first lists and sends one event only.
type flakySource struct {
	mu    sync.Mutex
	fails int
	lists int
}

func (f *flakySource) Containers(context.Context) ([]domains.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.fails > 0 {
		f.fails--
		return nil, errors.New("no such container: gone")
	}
	return []domains.Container{{ID: "a", Name: "web", IP: "10.0.0.2"}}, nil
}

func (f *flakySource) Watch(ctx context.Context, changed func()) error {
	changed()
	<-ctx.Done()
	return ctx.Err()
}

func TestWatchNamesTriesAFailedListAgain(t *testing.T) {
	old := listRetry
	listRetry = 10 * time.Millisecond
	defer func() { listRetry = old }()
	src := &flakySource{fails: 2}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []domains.Container, 1)
	go watchNames(ctx, src, func(cs []domains.Container) { got <- cs })
	select {
	case cs := <-got:
		if len(cs) != 1 || cs[0].Name != "web" {
			t.Errorf("published %+v", cs)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a failed list was not tried again")
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.lists != 3 {
		t.Errorf("%d lists, want 3 (two failures, one success)", src.lists)
	}
}

// brokenStream's event stream breaks at once the first time, then
// works.
type brokenStream struct {
	flakySource
	watches atomic.Int32
}

func (b *brokenStream) Watch(ctx context.Context, changed func()) error {
	if b.watches.Add(1) == 1 {
		return errors.New("unexpected EOF")
	}
	return b.flakySource.Watch(ctx, changed)
}

func TestWatchNamesOpensABrokenEventStreamAgain(t *testing.T) {
	src := &brokenStream{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []domains.Container, 1)
	go watchNames(ctx, src, func(cs []domains.Container) { got <- cs })
	select {
	case cs := <-got:
		if len(cs) != 1 || src.watches.Load() != 2 {
			t.Errorf("published %+v after %d watches, want one container after two", cs, src.watches.Load())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the event stream was not opened again")
	}
}
