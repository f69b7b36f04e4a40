package dockerapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// serve is a fake docker engine on a unix socket answering with h.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(shortdir.New(t), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return sock
}

func TestContainersRefusedOrGarbled(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want []string
	}{
		{"engine error", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "daemon is shutting down", http.StatusServiceUnavailable)
		}, []string{"list containers", "503", "daemon is shutting down"}},
		{"not JSON", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "<html>") },
			[]string{"list containers", "invalid character"}},
	} {
		_, err := Unix(serve(t, tc.h)).Containers(context.Background())
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err %v, want it to say %q", tc.name, err, w)
			}
		}
	}
}

// A container with its own labels whose image cannot be inspected fails
// the listing: guessing would let an image's labels claim names.
func TestContainersFailWhenTheImageCannotBeRead(t *testing.T) {
	const list = `[{"Id":"a1","Names":["/web"],"ImageID":"sha256:img","Labels":{"dev.vmdock.domains":"web.vmdock.localhost"}}]`
	for _, tc := range []struct {
		name  string
		image func(http.ResponseWriter)
		want  []string
	}{
		{"engine error", func(w http.ResponseWriter) { http.Error(w, "boom", http.StatusInternalServerError) },
			[]string{"inspect image sha256:img", "500", "boom"}},
		{"not JSON", func(w http.ResponseWriter) { fmt.Fprint(w, "{") },
			[]string{"inspect image sha256:img"}},
	} {
		sock := serve(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/containers/json" {
				fmt.Fprint(w, list)
				return
			}
			tc.image(w)
		})
		cs, err := Unix(sock).Containers(context.Background())
		if cs != nil {
			t.Errorf("%s: containers %+v despite the error", tc.name, cs)
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err %v, want it to say %q", tc.name, err, w)
			}
		}
	}
}

// An image's labels are read once; containers without vmdock labels of
// their own never cause a read.
func TestImageLabelsAreReadOnceAndOnlyWhenNeeded(t *testing.T) {
	const list = `[
 {"Id":"a1","Names":["/one"],"ImageID":"sha256:img","Labels":{"dev.vmdock.domains":"bank.vmdock.localhost"}},
 {"Id":"b2","Names":["/two"],"ImageID":"sha256:img","Labels":{"dev.vmdock.domains":"bank.vmdock.localhost"}},
 {"Id":"c3","Names":["/plain"],"ImageID":"sha256:other","Labels":{"maintainer":"x"}}
]`
	var inspects atomic.Int32
	sock := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/containers/json" {
			fmt.Fprint(w, list)
			return
		}
		inspects.Add(1)
		if r.URL.Path != "/images/sha256:img/json" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"Config":{"Labels":{"dev.vmdock.domains":"bank.vmdock.localhost"}}}`)
	})
	c := Unix(sock)
	for range 2 {
		cs, err := c.Containers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, ct := range cs {
			if _, ok := ct.Labels["dev.vmdock.domains"]; ok {
				t.Errorf("%s kept its image's domains label: %v", ct.Name, ct.Labels)
			}
		}
	}
	if n := inspects.Load(); n != 1 {
		t.Errorf("%d image inspections over two listings, want 1", n)
	}
}

// Past maxCachedImages the cache starts over instead of growing.
func TestImageLabelCacheIsBounded(t *testing.T) {
	sock := serve(t, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"Config":{"Labels":{"k":"v"}}}`) })
	c := Unix(sock)
	for i := range maxCachedImages + 1 {
		l, err := c.imageLabelsOf(context.Background(), fmt.Sprintf("sha256:%d", i))
		if err != nil || l["k"] != "v" {
			t.Fatalf("image %d: %v %v", i, l, err)
		}
	}
	if n := len(c.imageLabels); n != 1 {
		t.Errorf("%d images cached after %d, want the cache started over (1)", n, maxCachedImages+1)
	}
}

func TestWatchRefusedOrEnded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		h         http.HandlerFunc
		wantCalls int
		want      []string
	}{
		{"engine error", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "bad filter", http.StatusBadRequest)
		}, 0, []string{"events", "400", "bad filter"}},
		{"stream ends", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, `{"Type":"container","Action":"die"}`)
		}, 2, []string{"events: the stream ended"}},
		{"line too long", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, strings.Repeat("x", 1<<20+1))
		}, 1, []string{"events", "token too long"}},
	} {
		calls := 0
		err := Unix(serve(t, tc.h)).Watch(context.Background(), func() { calls++ })
		if calls != tc.wantCalls {
			t.Errorf("%s: %d calls, want %d", tc.name, calls, tc.wantCalls)
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err %v, want it to say %q", tc.name, err, w)
			}
		}
	}
}
