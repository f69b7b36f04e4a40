package migrate

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeEngine is a scripted Docker Engine API on a unix socket, for what a
// real engine cannot be made to say (a lying source). Each route answers
// one method and exact path; anything else is a 404, as an engine answers
// for what it does not have.
type fakeEngine struct {
	*Engine
	mu     sync.Mutex
	routes map[string]http.HandlerFunc
	calls  []string // "METHOD /path", in order
	bodies map[string][]byte
}

func newFakeEngine(t *testing.T, id string) *fakeEngine {
	t.Helper()
	// A short folder: a unix socket's path is limited to ~100 bytes.
	dir, err := os.MkdirTemp("", "mig")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeEngine{routes: map[string]http.HandlerFunc{}, bodies: map[string][]byte{}}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	f.Engine = NewEngine(sock)
	f.json("GET /_ping", "OK")
	f.json("GET /info", map[string]any{"ID": id, "DriverStatus": [][]string{}})
	f.json("GET /containers/json", []any{})
	f.json("GET /images/json", []any{})
	f.json("GET /volumes", map[string]any{"Volumes": []any{}})
	return f
}

func (f *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls = append(f.calls, key)
	f.bodies[key] = body
	h := f.routes[key]
	f.mu.Unlock()
	if h == nil {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "no such thing: " + r.URL.Path})
		return
	}
	h(w, r)
}

// handle sets what "METHOD /path" answers.
func (f *fakeEngine) handle(route string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[route] = h
}

// json makes route answer v as JSON with 200.
func (f *fakeEngine) json(route string, v any) {
	f.handle(route, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// status makes route answer code with message.
func (f *fakeEngine) status(route string, code int, message string) {
	f.handle(route, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": message})
	})
}

// called reports whether a request "METHOD /path" (or with that prefix)
// came.
func (f *fakeEngine) called(prefix string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

// body is the last request body of route.
func (f *fakeEngine) body(route string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[route]
}
