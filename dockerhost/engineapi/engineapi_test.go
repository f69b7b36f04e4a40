package engineapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
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

// An engine's error answer carries its status code and message, whether
// the body is the engine's JSON or plain text.
func TestErrorCarriesTheStatus(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"json", `{"message":"No such container: x"}`, http.StatusNotFound, "No such container: x"},
		{"text", "bad filter\n", http.StatusBadRequest, "bad filter"},
	} {
		c := Unix(serve(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		err := c.Delete(context.Background(), "/containers/x", nil)
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != tc.status || ae.Message != tc.want {
			t.Errorf("%s: err %#v, want status %d message %q", tc.name, err, tc.status, tc.want)
		}
		if IsNotFound(err) != (tc.status == http.StatusNotFound) {
			t.Errorf("%s: IsNotFound(%v) wrong", tc.name, err)
		}
		if !strings.Contains(err.Error(), "DELETE /containers/x") {
			t.Errorf("%s: err %v does not name the request", tc.name, err)
		}
	}
}

func TestCallSendsAndDecodesJSON(t *testing.T) {
	c := Unix(serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" || r.URL.Query().Get("name") != "web" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"Id":"abc"}`))
	}))
	var out struct{ Id string } //nolint:revive // the API's spelling
	if err := c.Post(context.Background(), "/containers/create", map[string][]string{"name": {"web"}}, map[string]string{"Image": "x"}, &out); err != nil || out.Id != "abc" {
		t.Fatalf("Post = %v, %q", err, out.Id)
	}
}

func TestPing(t *testing.T) {
	c := Unix(serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_ping" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("OK"))
	}))
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := Unix(filepath.Join(t.TempDir(), "none.sock")).Ping(context.Background()); err == nil {
		t.Fatal("Ping of a missing socket succeeded")
	}
}
