package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func sha256Of(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// server serves files by path and counts requests per path.
type server struct {
	*httptest.Server
	files map[string][]byte
	hits  map[string]*atomic.Int32
}

func newServer(t *testing.T, files map[string][]byte, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{files: files, hits: map[string]*atomic.Int32{}}
	for p := range files {
		s.hits[p] = new(atomic.Int32)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := s.hits[r.URL.Path]; ok {
			c.Add(1)
		}
		if h != nil {
			h(w, r)
			return
		}
		b, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

// Retries in tests wait a millisecond, not seconds.
func init() { firstRetryWait = time.Millisecond }

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestEnsureDownloadDigestGoodThenCached(t *testing.T) {
	body := rawDisk("raw disk")
	srv := newServer(t, map[string][]byte{"/disk.img": body}, nil)
	cache := t.TempDir()
	opts := Options{CacheDir: cache, Digest: sha256Of(body)}
	for i := 0; i < 2; i++ {
		img, err := Ensure(context.Background(), srv.URL+"/disk.img", "amd64", opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(img.Disk)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("cached disk differs from the served one (err %v)", err)
		}
		if img.DiskFormat != KindRaw || img.Kernel != "" || img.Digest != sha256Of(body) || img.Arch != "amd64" {
			t.Errorf("image = %+v", img)
		}
	}
	if n := srv.hits["/disk.img"].Load(); n != 1 {
		t.Errorf("server hit %d times, want 1 (second Ensure must use the cache)", n)
	}
}

func TestEnsureDownloadFailures(t *testing.T) {
	body := bytes.Repeat([]byte{7}, 50000)
	wrong := sha256Of([]byte("something else"))
	tests := []struct {
		name    string
		handler http.HandlerFunc
		digest  string
		want    []string // substrings of the error
	}{
		{
			name:    "digest mismatch",
			handler: func(w http.ResponseWriter, r *http.Request) { w.Write(body) },
			digest:  wrong,
			want:    []string{"digest mismatch", wrong, sha256Of(body)},
		},
		{
			name: "truncated body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				w.Write(body[:len(body)/2])
			},
			want: []string{"download", "unexpected EOF", "gave up after 3 tries without progress"},
		},
		{
			name:    "not found",
			handler: http.NotFound,
			want:    []string{"404"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, nil, tt.handler)
			cache := t.TempDir()
			_, err := Ensure(context.Background(), srv.URL+"/disk.img", "amd64", Options{CacheDir: cache, Digest: tt.digest})
			if err == nil {
				t.Fatal("Ensure succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if left := dirEntries(t, filepath.Join(cache, "tmp")); len(left) != 0 {
				t.Errorf("temp files left behind: %v", left)
			}
			if left := dirEntries(t, filepath.Join(cache, "blobs")); len(left) != 0 {
				t.Errorf("cache changed by a failed download: %v", left)
			}
		})
	}
}

func TestEnsureDigestMismatchKeepsCache(t *testing.T) {
	good := rawDisk("good image")
	srv := newServer(t, map[string][]byte{"/a": good, "/b": rawDisk("evil image")}, nil)
	cache := t.TempDir()
	if _, err := Ensure(context.Background(), srv.URL+"/a", "amd64", Options{CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	before := dirEntries(t, filepath.Join(cache, "blobs"))
	_, err := Ensure(context.Background(), srv.URL+"/b", "amd64", Options{CacheDir: cache, Digest: sha256Of([]byte("expected image"))})
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("error %v, want a digest mismatch", err)
	}
	if len(before) != 2 { // blob + metadata
		t.Fatalf("blobs before = %v", before)
	}
	if after := dirEntries(t, filepath.Join(cache, "blobs")); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("cache changed: %v -> %v", before, after)
	}
}

func TestEnsureSlowBodyReportsProgress(t *testing.T) {
	body := rawDisk("slow")
	srv := newServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		for i := 0; i < 20; i++ {
			w.Write(body[i*len(body)/20 : (i+1)*len(body)/20])
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
		}
	})
	var out bytes.Buffer
	_, err := Ensure(context.Background(), srv.URL+"/slow", "arm64", Options{CacheDir: t.TempDir(), Progress: &out})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 10 {
		t.Fatalf("want 10 progress lines, got %d:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		if want := fmt.Sprintf(": %d%% (", (i+1)*10); !strings.Contains(l, want) {
			t.Errorf("line %d = %q, want it to contain %q", i, l, want)
		}
	}
}

func TestEnsureRefetchesCorruptCacheEntry(t *testing.T) {
	body := rawDisk("disk")
	srv := newServer(t, map[string][]byte{"/d": body}, nil)
	cache := t.TempDir()
	opts := Options{CacheDir: cache}
	img, err := Ensure(context.Background(), srv.URL+"/d", "amd64", opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img.Disk, []byte("bit rot"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err = Ensure(context.Background(), srv.URL+"/d", "amd64", opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(img.Disk); !bytes.Equal(got, body) {
		t.Error("corrupt cache entry was not replaced")
	}
	if n := srv.hits["/d"].Load(); n != 2 {
		t.Errorf("server hit %d times, want 2", n)
	}
}

func TestEnsureBadInput(t *testing.T) {
	tests := []struct{ ref, arch, want string }{
		{"vmdock", "riscv64", `architecture "riscv64" not supported`},
		{"ubuntu", "amd64", `image "ubuntu": unknown name`},
		{"ftp://x/y.img", "amd64", "scheme not supported"},
		{"./no/such/file.img", "amd64", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			t.Setenv("VMDOCK_IMAGE_DIR", t.TempDir())
			_, err := Ensure(context.Background(), tt.ref, tt.arch, Options{CacheDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseDigest(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"sha256:" + strings.Repeat("0a", 32), true},
		{"SHA512:" + strings.Repeat("0A", 64), true},
		{"sha256:" + strings.Repeat("0a", 31), false},
		{"md5:" + strings.Repeat("0a", 16), false},
		{"sha256:" + strings.Repeat("zz", 32), false},
		{strings.Repeat("0a", 32), false},
	}
	for _, tt := range tests {
		if _, err := ParseDigest(tt.in); (err == nil) != tt.ok {
			t.Errorf("ParseDigest(%q) err = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

// A connection that goes quiet without closing is given up after the
// stall timeout and the download resumes from where it stopped, within
// the same Ensure.
func TestEnsureResumesAStalledDownload(t *testing.T) {
	old := stallTimeout
	stallTimeout = 100 * time.Millisecond
	t.Cleanup(func() { stallTimeout = old })
	body := rawDisk("stalls half way")
	var mu sync.Mutex
	var ranges []string
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := newServer(t, nil, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		first := len(ranges) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			select { // quiet, connection open
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	})
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a download that waits for the stall forever fails here
	defer cancel()
	img, err := Ensure(ctx, srv.URL+"/d", "amd64", Options{CacheDir: t.TempDir(), Digest: sha256Of(body), Progress: &out})
	if err != nil {
		t.Fatalf("a stalled download: %v", err)
	}
	if got, _ := os.ReadFile(img.Disk); !bytes.Equal(got, body) {
		t.Error("the resumed download differs from the served file")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"", "bytes=" + strconv.Itoa(len(body)/2) + "-"}; strings.Join(ranges, ",") != strings.Join(want, ",") {
		t.Errorf("Range headers = %q, want %q", ranges, want)
	}
	if !strings.Contains(out.String(), "resuming in") {
		t.Errorf("progress does not say it resumed:\n%s", out.String())
	}
}

// A download whose size nothing states (a URL import) stops at a cap,
// whether the server says a length or streams without one.
func TestDownloadOfUnknownSizeIsCapped(t *testing.T) {
	saved := maxUnsizedDownload
	maxUnsizedDownload = minRawDiskSize + 64<<10
	t.Cleanup(func() { maxUnsizedDownload = saved })
	body := rawDisk("big")
	body = append(body, make([]byte, 100<<10)...)
	for name, h := range map[string]http.HandlerFunc{
		"stated length": func(w http.ResponseWriter, r *http.Request) { w.Write(body) },
		"streamed": func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i < len(body); i += 4096 {
				w.Write(body[i:min(i+4096, len(body))])
				w.(http.Flusher).Flush()
			}
		},
	} {
		srv := newServer(t, nil, h)
		cache := t.TempDir()
		_, err := Import(context.Background(), srv.URL+"/disk.img", "amd64", Options{CacheDir: cache})
		if err == nil || !strings.Contains(err.Error(), "more than "+mib(maxUnsizedDownload)) {
			t.Errorf("%s: %v, want the download refused at the cap", name, err)
		}
		if left := dirEntries(t, filepath.Join(cache, "tmp")); len(left) != 0 {
			t.Errorf("%s: temp files left behind: %v", name, left)
		}
	}
	// a small one of unknown size is fine
	srv := newServer(t, map[string][]byte{"/small.img": rawDisk("small")}, nil)
	if _, err := Import(context.Background(), srv.URL+"/small.img", "amd64", Options{CacheDir: t.TempDir()}); err != nil {
		t.Errorf("a small download of unknown size: %v", err)
	}
}

// Over plain HTTP across a network an image could be swapped on the way:
// a non-loopback http:// reference needs a digest to check it against.
func TestPlainHTTPReferenceNeedsADigest(t *testing.T) {
	for _, ref := range []string{"http://images.example.com/disk.img", "http://10.1.2.3:8080/disk.qcow2"} {
		for _, op := range []func() error{
			func() error {
				_, err := Ensure(context.Background(), ref, "amd64", Options{CacheDir: t.TempDir()})
				return err
			},
			func() error {
				_, err := Import(context.Background(), ref, "amd64", Options{CacheDir: t.TempDir()})
				return err
			},
		} {
			if err := op(); err == nil || !strings.Contains(err.Error(), "--digest") {
				t.Errorf("%s without a digest: %v, want a refusal naming --digest", ref, err)
			}
		}
		if err := checkPlainHTTP(source{URL: ref, Digest: Digest{Algo: "sha256", Hex: strings.Repeat("a", 64)}}); err != nil {
			t.Errorf("%s with a digest: %v", ref, err)
		}
	}
	for _, ok := range []string{"https://images.example.com/disk.img", "http://127.0.0.1:8080/disk.img", "http://localhost/d", "http://[::1]/d"} {
		if err := checkPlainHTTP(source{URL: ok}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
