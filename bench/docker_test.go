package bench

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vmdock/vmdock/dockerhost/engineapi"
	"github.com/vmdock/vmdock/internal/shortdir"
)

// fakeDocker is a docker socket that knows one image and records calls.
func fakeDocker(t *testing.T) (dockerAPI, *[]string, *map[string]any) {
	t.Helper()
	dir := shortdir.New(t) // unix socket paths are short
	sock := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []string
	var created map[string]any
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Method+" "+r.URL.RequestURI())
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/containers/create":
			json.NewDecoder(r.Body).Decode(&created) //nolint:errcheck
			if created["Image"] != "vmdock-test:latest" {
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(`{"message":"No such image: ` + created["Image"].(string) + `"}`))
				return
			}
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"Id":"c0ffee"}`))
		case r.Method == http.MethodPost && r.URL.Path == "/containers/c0ffee/start":
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodDelete && r.URL.Path == "/containers/c0ffee":
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodDelete && r.URL.Path == "/containers/stuck":
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"message":"could not kill: runc answered 404 times"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"message":"No such container"}`))
		}
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return dockerAPI{api: engineapi.Unix(sock)}, &calls, &created
}

func TestDockerRunContainer(t *testing.T) {
	d, calls, created := fakeDocker(t)
	ctx := context.Background()
	if err := d.remove(ctx, "leftover"); err != nil {
		t.Errorf("removing a container that is not there: %v", err)
	}
	id, err := d.runContainer(ctx, "web", "vmdock-test:latest", map[string]string{"dev.vmdock.http-port": "80"}, 80, 18123)
	if err != nil || id != "c0ffee" {
		t.Fatalf("%q %v", id, err)
	}
	if err := d.remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	want := []string{"DELETE /containers/leftover?force=1", "POST /containers/create?name=web", "POST /containers/c0ffee/start", "DELETE /containers/c0ffee?force=1"}
	if strings.Join(*calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(*calls, "\n"), strings.Join(want, "\n"))
	}
	b, _ := json.Marshal(*created)
	for _, w := range []string{`"PortBindings":{"80/tcp":[{"HostPort":"18123"}]}`, `"Labels":{"dev.vmdock.http-port":"80"}`, `"ExposedPorts":{"80/tcp":{}}`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("create body %s lacks %s", b, w)
		}
	}
}

func TestDockerRunContainerNoImage(t *testing.T) {
	d, calls, _ := fakeDocker(t)
	_, err := d.runContainer(context.Background(), "web", "other:latest", nil, 80, 18123)
	if err == nil || !strings.Contains(err.Error(), "No such image: other:latest") {
		t.Fatalf("err = %v", err)
	}
	if len(*calls) != 1 {
		t.Errorf("calls after a refused create: %v", *calls)
	}
}

// Only the engine's status says "not there": an error whose message
// happens to hold " 404 " is still an error.
func TestDockerRemoveFailsOnAnEngineError(t *testing.T) {
	d, _, _ := fakeDocker(t)
	err := d.remove(context.Background(), "stuck")
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("remove of a container the engine cannot remove = %v, want its 500", err)
	}
}
