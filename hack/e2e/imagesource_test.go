//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// outsideCheckout runs vmdock as an installed binary runs on a machine
// with no vmdock checkout (a Mac): a copy of the binary outside the
// checkout, VMDOCK_IMAGE_DIR and VMDOCK_IMAGE_BASE_URL unset, and an
// image cache of the test's own, so the image a start boots is one this
// test really downloaded or imported.
func (e *env) outsideCheckout(t *testing.T, base string) {
	t.Helper()
	dst := filepath.Join(base, "installed", "vmdock")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(e.vmdock, dst, 0o755); err != nil {
		t.Fatal(err)
	}
	e.vmdock = dst
	e.extraEnv = append(e.extraEnv, "VMDOCK_IMAGE_DIR=", "VMDOCK_IMAGE_BASE_URL=", "VMDOCK_CACHE="+filepath.Join(base, "image cache"))
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// releaseServer serves `make release`'s bin/release on loopback, as any
// static host publishes images, and counts what it was asked for.
// The first GET of an image archive is cut half way, as a flaky network
// cuts a first download on a Mac: the start must resume it by itself.
type releaseServer struct {
	URL    string
	srv    *http.Server
	mu     sync.Mutex
	gets   map[string]int
	ranges map[string][]string // the Range header of each GET, by path
}

func (e *env) serveRelease(t *testing.T) *releaseServer {
	t.Helper()
	dir := filepath.Join(e.repo, "bin", "release")
	if _, err := os.Stat(filepath.Join(dir, "images.json")); err != nil {
		t.Fatalf("no published images to serve: run `make release ARCH=amd64` first (%v)", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := &releaseServer{URL: "http://" + l.Addr().String() + "/", gets: map[string]int{}, ranges: map[string][]string{}}
	files := http.FileServer(http.Dir(dir))
	rs.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.gets[r.URL.Path]++
		first := rs.gets[r.URL.Path] == 1
		rs.ranges[r.URL.Path] = append(rs.ranges[r.URL.Path], r.Header.Get("Range"))
		rs.mu.Unlock()
		if first && strings.HasSuffix(r.URL.Path, ".tar.zst") {
			serveHalfAndCut(w, filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(r.URL.Path, "/"))))
			return
		}
		files.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go rs.srv.Serve(l)
	t.Cleanup(rs.close)
	e.extraEnv = append(e.extraEnv, "VMDOCK_IMAGE_BASE_URL="+rs.URL)
	return rs
}

func (rs *releaseServer) close() { rs.srv.Close() }

// serveHalfAndCut promises the whole file, sends its first half and drops
// the connection.
func serveHalfAndCut(w http.ResponseWriter, path string) {
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	io.CopyN(w, f, fi.Size()/2)
	w.(http.Flusher).Flush()
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}

// rangesOf is the Range header of each GET of path, in order.
func (rs *releaseServer) rangesOf(path string) []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string(nil), rs.ranges[path]...)
}

func (rs *releaseServer) requests(path string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.gets[path]
}

// imageRow is what the checks read of `vmdock image list --json`.
type imageRow struct {
	Digest  string `json:"digest"`
	Source  string `json:"source"`
	Kind    string `json:"kind"`
	Arch    string `json:"arch"`
	Default bool   `json:"default"`
}

// checkDefaultImageFrom proves the image list holds one vmdock image for
// arch, marked as the default start's, that came from source.
func checkDefaultImageFrom(t *testing.T, e *env, arch, source string) imageRow {
	t.Helper()
	out := e.run(time.Minute, e.vmdock, "image", "list", "--json")
	var rows []imageRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("image list --json: %v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0].Source != source || !rows[0].Default || rows[0].Kind != "vmdock" || rows[0].Arch != arch {
		t.Fatalf("image list = %+v, want one default vmdock %s image from %s", rows, arch, source)
	}
	st := e.run(time.Minute, e.vmdock, "status", "--json")
	if !strings.Contains(st, `"pinned": "`+rows[0].Digest+`"`) {
		t.Errorf("status --json does not show the instance pinned to %s:\n%s", rows[0].Digest, st)
	}
	return rows[0]
}

// checkPinnedBuildRefusesAnotherManifest builds vmdock as a release is
// built, its default image URL the release served here, but pinned to
// another images.json digest, and starts it with no override: the start
// must stop at the image step, before any VM, naming the digest served and
// the one pinned. Only the link step differs from bin/vmdock's build.
func checkPinnedBuildRefusesAnotherManifest(t *testing.T, e *env, rs *releaseServer, base string) {
	e.timed("a build pinned to another images.json refuses the release's", func(t *testing.T) {
		manifest, err := os.ReadFile(filepath.Join(e.repo, "bin", "release", "images.json"))
		if err != nil {
			t.Fatal(err)
		}
		served := "sha256:" + sha256Hex(manifest)
		pinned := strings.Repeat("0", 64)
		bin := filepath.Join(base, "pinned", "vmdock")
		ldflags := "-X github.com/vmdock/vmdock/images.BaseURL=" + rs.URL + " -X github.com/vmdock/vmdock/images.ManifestSHA256=" + pinned
		build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/vmdock")
		build.Dir = e.repo
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build -ldflags %q: %v\n%s", ldflags, err, out)
		}
		home := filepath.Join(base, "pinned home")
		env := append(e.environ(), "VMDOCK_HOME="+home, "VMDOCK_CACHE="+filepath.Join(base, "pinned cache"),
			"VMDOCK_IMAGE_BASE_URL=", "VMDOCK_IMAGE_DIR=")
		run := func(args ...string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env, cmd.Dir = env, e.work
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := run("version"); err != nil || !strings.Contains(out, "images: "+rs.URL) || !strings.Contains(out, "manifest: sha256:"+pinned+" (pinned") {
			t.Errorf("version of the pinned build: %v\n%s", err, out)
		}
		out, err := run("start", "--cpus", "1", "--memory", "2", "--network-mode", "isolated")
		if err == nil {
			t.Fatalf("a start pinned to another manifest succeeded:\n%s", out)
		}
		for _, want := range []string{"digest " + served, "pinned to sha256:" + pinned} {
			if !strings.Contains(out, want) {
				t.Errorf("start's refusal lacks %q:\n%s", want, out)
			}
		}
		if n := rs.requests("/vmdock-amd64.tar.zst"); n != 0 {
			t.Errorf("the refused release's image was fetched %d times", n)
		}
		// Nothing may run after the refusal (no host agent was spawned).
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			procs := processesMatching(home)
			if len(procs) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("processes left by the refused start: %v", procs)
				break
			}
		}
		// The CLI resolves the default image before it writes anything, so
		// a refused manifest leaves no instance behind.
		if _, err := os.Stat(filepath.Join(home, "default")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused start left its instance folder (%v)", err)
		}
	})
}
