package dockerapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// engine is a fake docker engine on a unix socket: a fixed container list
// and an event stream the test feeds.
func engine(t *testing.T, list string, events chan string) string {
	t.Helper()
	return engineWithImages(t, list, nil, events)
}

// engineWithImages is engine with images to inspect (ID to the JSON of
// GET /images/{id}/json); other images are not found.
func engineWithImages(t *testing.T, list string, images map[string]string, events chan string) string {
	t.Helper()
	sock := filepath.Join(shortdir.New(t), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/containers/json":
			fmt.Fprint(w, list)
		case "/events":
			if !strings.Contains(r.URL.Query().Get("filters"), `"container"`) {
				http.Error(w, "no filter", 400)
				return
			}
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			for {
				select {
				case ev, ok := <-events:
					if !ok {
						return
					}
					fmt.Fprintln(w, ev)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		default:
			if id, ok := strings.CutPrefix(r.URL.Path, "/images/"); ok && images[strings.TrimSuffix(id, "/json")] != "" {
				fmt.Fprint(w, images[strings.TrimSuffix(id, "/json")])
				return
			}
			http.NotFound(w, r)
		}
	}))
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return sock
}

const list = `[
 {"Id":"a1","Names":["/web"],"Labels":{"dev.vmdock.http-port":"3000"},"Created":1700000000,
  "Ports":[{"PrivatePort":80,"Type":"tcp"},{"PrivatePort":53,"Type":"udp"}],
  "HostConfig":{"NetworkMode":"bridge"},
  "NetworkSettings":{"Networks":{"zz":{"IPAddress":"10.9.0.2"},"bridge":{"IPAddress":"172.17.0.2"}}}},
 {"Id":"b2","Names":["/hosted"],"Created":1700000001,"Ports":[],"HostConfig":{"NetworkMode":"host"},
  "NetworkSettings":{"Networks":{"host":{"IPAddress":""}}}}
]`

func TestContainers(t *testing.T) {
	c := Unix(engine(t, list, nil))
	cs, err := c.Containers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 {
		t.Fatalf("%d containers", len(cs))
	}
	web := cs[0]
	if web.Name != "web" || web.IP != "172.17.0.2" || len(web.Exposed) != 1 || web.Exposed[0] != 80 ||
		web.Labels["dev.vmdock.http-port"] != "3000" || web.Created.Unix() != 1700000000 {
		t.Errorf("web: %+v", web)
	}
	if cs[1].IP != "127.0.0.1" {
		t.Errorf("a host-network container's address %q, want the guest's loopback", cs[1].IP)
	}
}

func TestWatchCallsOnOpenAndOnEachEvent(t *testing.T) {
	events := make(chan string)
	c := Unix(engine(t, "[]", events))
	calls := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, func() { calls <- struct{}{} }) }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-calls:
		case <-time.After(2 * time.Second):
			t.Fatalf("no call %s", what)
		}
	}
	wait("when the stream opened")
	events <- `{"Type":"container","Action":"start","id":"a1"}`
	wait("after an event")
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Watch returned nil after cancel")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not return after cancel")
	}
}

func TestErrorsNameWhatFailed(t *testing.T) {
	c := Unix(filepath.Join(shortdir.New(t), "none.sock"))
	if _, err := c.Containers(context.Background()); err == nil || !strings.Contains(err.Error(), "list containers") {
		t.Errorf("Containers: %v", err)
	}
	if err := c.Watch(context.Background(), func() {}); err == nil || !strings.Contains(err.Error(), "events") {
		t.Errorf("Watch: %v", err)
	}
}

// Labels a container only inherits from its image are not its own: an
// image must not claim names (or pick ports) for every container run
// from it. The same label set on the container counts.
func TestImageLabelsAreNotTheContainers(t *testing.T) {
	const list = `[
 {"Id":"a1","Names":["/pulled"],"ImageID":"sha256:img","Labels":{"dev.vmdock.domains":"bank.vmdock.localhost","dev.vmdock.http-port":"8080","maintainer":"x"}},
 {"Id":"b2","Names":["/own"],"ImageID":"sha256:img","Labels":{"dev.vmdock.domains":"own.vmdock.localhost","dev.vmdock.http-port":"8080","maintainer":"x"}},
 {"Id":"c3","Names":["/gone"],"ImageID":"sha256:deleted","Labels":{"dev.vmdock.domains":"gone.vmdock.localhost"}}
]`
	images := map[string]string{"sha256:img": `{"Id":"sha256:img","Config":{"Labels":{"dev.vmdock.domains":"bank.vmdock.localhost","dev.vmdock.http-port":"8080","maintainer":"x"}}}`}
	cs, err := Unix(engineWithImages(t, list, images, nil)).Containers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l := cs[0].Labels; l["dev.vmdock.domains"] != "" || l["dev.vmdock.http-port"] != "" || l["maintainer"] != "x" {
		t.Errorf("a container with its image's labels only: %v, want the vmdock ones dropped", l)
	}
	if l := cs[1].Labels; l["dev.vmdock.domains"] != "own.vmdock.localhost" || l["dev.vmdock.http-port"] != "" {
		t.Errorf("a container that sets its own domains label: %v, want it kept and the inherited port dropped", l)
	}
	if l := cs[2].Labels; l["dev.vmdock.domains"] != "gone.vmdock.localhost" {
		t.Errorf("a container whose image is gone: %v, want its labels as listed", l)
	}
}
