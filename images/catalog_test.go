package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// release is a published image set served by a test server: the archive
// for each arch and images.json.
type release struct {
	srv       *httptest.Server
	mu        sync.Mutex
	files     map[string][]byte
	ranges    []string // Range headers seen, by request
	cutAfter  int      // >0: the next archive response stops after this many bytes
	cuts      int      // how many responses in a row cutAfter cuts (0 means one)
	downOnCut bool     // the server goes down once the last cut is made
	down      bool
}

func newRelease(t *testing.T, arches ...string) *release {
	t.Helper()
	return newReleaseWith(t, nil, arches...)
}

// newReleaseWith publishes images whose manifests edit changes, so two
// releases can differ.
func newReleaseWith(t *testing.T, edit func(*Manifest), arches ...string) *release {
	t.Helper()
	r := &release{files: map[string][]byte{}}
	m := ReleaseManifest{ImageFormat: ImageFormat, Images: map[string]ReleaseImage{}}
	for _, arch := range arches {
		p := filepath.Join(t.TempDir(), "vmdock-"+arch+".tar.zst")
		writeArchive(t, p, fakeImage(t, arch, edit))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := "vmdock-" + arch + ".tar.zst"
		r.files["/rel/"+name] = b
		m.Images[arch] = ReleaseImage{File: name, Size: int64(len(b)), SHA256: strings.TrimPrefix(sha256Of(b), "sha256:"), Kernel: "6.12.0", Docker: "26.1.5", Containerd: "1.7.24", VMDockVersion: "v1"}
	}
	r.setManifest(t, m)
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *release) setManifest(t *testing.T, m ReleaseManifest) {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.files["/rel/images.json"] = b
	r.mu.Unlock()
}

func (r *release) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	b, ok := r.files[req.URL.Path]
	down, cut := r.down, r.cutAfter
	isArchive := strings.HasSuffix(req.URL.Path, ".tar.zst")
	if isArchive {
		r.ranges = append(r.ranges, req.Header.Get("Range"))
		if r.cuts--; r.cuts <= 0 && cut > 0 {
			r.cutAfter = 0
			r.down = r.downOnCut
		}
	}
	r.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if !ok {
		http.NotFound(w, req)
		return
	}
	if !isArchive {
		w.Write(b)
		return
	}
	if cut > 0 {
		// Promise the whole file (or the rest asked for), send cut bytes
		// of it, drop the connection.
		from := 0
		if rest, ok := strings.CutPrefix(req.Header.Get("Range"), "bytes="); ok {
			from, _ = strconv.Atoi(strings.TrimSuffix(rest, "-"))
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(b)-1, len(b)))
			w.Header().Set("Content-Length", strconv.Itoa(len(b)-from))
			w.WriteHeader(http.StatusPartialContent)
		} else {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.WriteHeader(http.StatusOK)
		}
		w.Write(b[from:min(from+cut, len(b))])
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(b))
}

func (r *release) base() string { return r.srv.URL + "/rel/" }

// noLocalImages makes sure the tests see no build from this checkout.
func noLocalImages(t *testing.T) {
	t.Setenv("VMDOCK_IMAGE_DIR", "")
	t.Setenv(BaseURLEnv, "")
	t.Chdir(t.TempDir())
}

func TestDefaultImageDownloadsFromTheReleaseManifest(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64", "arm64")
	cache := t.TempDir()
	opts := Options{CacheDir: cache, BaseURL: r.base()}

	d, err := ResolveDefault(context.Background(), "arm64", opts)
	if err != nil {
		t.Fatal(err)
	}
	if d.Source != SourceDownload || d.URL != r.base()+"vmdock-arm64.tar.zst" || d.Cached || d.Release == nil || d.Release.Docker != "26.1.5" {
		t.Errorf("ResolveDefault = %+v", d)
	}
	img, err := Ensure(context.Background(), "", "arm64", opts)
	if err != nil {
		t.Fatal(err)
	}
	if img.Kind != KindVMDock || img.Arch != "arm64" || img.Digest != d.Digest {
		t.Errorf("image = %+v, want the manifest's arm64 image %s", img, d.Digest)
	}
	c, _ := OpenCache(cache)
	entries, _ := c.Entries()
	if len(entries) != 1 || entries[0].Source != d.URL || entries[0].Name != NameVMDock {
		t.Errorf("cache entries = %+v, want one from %s", entries, d.URL)
	}

	// Offline: the server is gone; the manifest fetched earlier and the
	// cached image still start.
	r.srv.Close()
	d2, err := ResolveDefault(context.Background(), "arm64", opts)
	if err != nil || !d2.Cached || d2.Digest != d.Digest {
		t.Fatalf("offline ResolveDefault = %+v, %v; want the cached image", d2, err)
	}
	if _, err := Ensure(context.Background(), "vmdock", "arm64", opts); err != nil {
		t.Errorf("offline Ensure with a cached image: %v", err)
	}
}

func TestDownloadResumesWithinOneStart(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	cache := t.TempDir()
	var out bytes.Buffer
	opts := Options{CacheDir: cache, BaseURL: r.base(), Progress: &out}
	size := len(r.files["/rel/vmdock-amd64.tar.zst"])
	quarter := size/4 + 1
	r.cutAfter, r.cuts = quarter, 3
	img, err := Ensure(context.Background(), "", "amd64", opts)
	if err != nil {
		t.Fatalf("a download cut three times, each after some progress: %v", err)
	}
	if img.Kind != KindVMDock {
		t.Errorf("image = %+v", img)
	}
	want := []string{"", "bytes=" + strconv.Itoa(quarter) + "-", "bytes=" + strconv.Itoa(2*quarter) + "-", "bytes=" + strconv.Itoa(3*quarter) + "-"}
	if strings.Join(r.ranges, ",") != strings.Join(want, ",") {
		t.Errorf("Range headers = %q, want %q", r.ranges, want)
	}
	if n := strings.Count(out.String(), "resuming in"); n != 3 {
		t.Errorf("progress output says %d times that it resumes, want 3:\n%s", n, out.String())
	}
	if partials, _ := filepath.Glob(filepath.Join(cache, "tmp", "*")); len(partials) != 0 {
		t.Errorf("left in tmp after the download: %v", partials)
	}
}

func TestDownloadResumesAfterACut(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	cache := t.TempDir()
	opts := Options{CacheDir: cache, BaseURL: r.base()}
	size := len(r.files["/rel/vmdock-amd64.tar.zst"])
	// Cut, then the server stops answering: the start gives up after the
	// tries without progress and the next start resumes.
	r.cutAfter, r.downOnCut = size/2, true
	_, err := Ensure(context.Background(), "", "amd64", opts)
	if err == nil || !strings.Contains(err.Error(), "download "+r.base()+"vmdock-amd64.tar.zst") || !strings.Contains(err.Error(), "without progress") {
		t.Fatalf("cut download: err = %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
	partials, _ := filepath.Glob(filepath.Join(cache, "tmp", PartialPrefix+"*"))
	if len(partials) != 1 {
		t.Fatalf("partial files = %v, want one kept for resuming", partials)
	}
	if fi, _ := os.Stat(partials[0]); fi.Size() != int64(size/2) {
		t.Errorf("partial holds %d bytes, want %d", fi.Size(), size/2)
	}
	r.mu.Lock()
	r.down = false
	r.mu.Unlock()
	img, err := Ensure(context.Background(), "", "amd64", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := "bytes=" + strconv.Itoa(size/2) + "-"
	wantRanges := []string{"", want, want, want, want} // the first, 3 refused tries, the resume
	if strings.Join(r.ranges, ",") != strings.Join(wantRanges, ",") {
		t.Errorf("Range headers = %q, want %q", r.ranges, wantRanges)
	}
	if img.Kind != KindVMDock {
		t.Errorf("image = %+v", img)
	}
	if partials, _ := filepath.Glob(filepath.Join(cache, "tmp", "*")); len(partials) != 0 {
		t.Errorf("left in tmp after the download: %v", partials)
	}
}

func TestDownloadRefusesAChangedByte(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	b := r.files["/rel/vmdock-amd64.tar.zst"]
	bad := bytes.Clone(b)
	bad[len(bad)/2] ^= 1
	r.files["/rel/vmdock-amd64.tar.zst"] = bad
	cache := t.TempDir()
	_, err := Ensure(context.Background(), "", "amd64", Options{CacheDir: cache, BaseURL: r.base()})
	if err == nil || !errors.Is(err, ErrDigestMismatch) || !strings.Contains(err.Error(), "is not used") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("changed byte: err = %v, want a one-line digest mismatch", err)
	}
	if left := cachedData(t, cache); len(left) != 0 {
		t.Errorf("a refused download left %v in the cache", left)
	}
}

func TestReleaseManifestRefusals(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	cache := t.TempDir()
	opts := Options{CacheDir: cache, BaseURL: r.base()}

	r.setManifest(t, ReleaseManifest{ImageFormat: ImageFormat + 1, Images: map[string]ReleaseImage{}})
	_, err := Ensure(context.Background(), "", "amd64", opts)
	if err == nil || !strings.Contains(err.Error(), "imageFormat 2") || !strings.Contains(err.Error(), "understands imageFormat 1") {
		t.Errorf("unknown imageFormat: err = %v", err)
	}

	m := ReleaseManifest{ImageFormat: ImageFormat, Images: map[string]ReleaseImage{
		"amd64": {File: "vmdock-amd64.tar.zst", Size: 10, SHA256: strings.Repeat("ab", 32)}}}
	r.setManifest(t, m)
	_, err = Ensure(context.Background(), "", "arm64", opts)
	if err == nil || !strings.Contains(err.Error(), "has no arm64 image (it has: amd64)") {
		t.Errorf("missing arch: err = %v", err)
	}

	m.Images["amd64"] = ReleaseImage{File: "../../etc/passwd", Size: 10, SHA256: strings.Repeat("ab", 32)}
	r.setManifest(t, m)
	if _, err = Ensure(context.Background(), "", "amd64", opts); err == nil || !strings.Contains(err.Error(), "want a plain file name") {
		t.Errorf("file with a path: err = %v", err)
	}

	m.Images["amd64"] = ReleaseImage{File: "gone.tar.zst", Size: 10, SHA256: strings.Repeat("ab", 32)}
	r.setManifest(t, m)
	_, err = Ensure(context.Background(), "", "amd64", opts)
	if err == nil || !strings.Contains(err.Error(), "gone.tar.zst: server answered 404 Not Found") {
		t.Errorf("404: err = %v", err)
	}

	_, err = Ensure(context.Background(), "", "amd64", Options{CacheDir: t.TempDir(), BaseURL: r.srv.URL + "/nothing/"})
	if err == nil || !strings.Contains(err.Error(), "images.json") || !strings.Contains(err.Error(), "404") {
		t.Errorf("no manifest: err = %v", err)
	}
}

func TestNoBaseURLNamesTheWaysOut(t *testing.T) {
	noLocalImages(t)
	old := BaseURL
	BaseURL = ""
	t.Cleanup(func() { BaseURL = old })
	_, err := Ensure(context.Background(), "", "arm64", Options{CacheDir: t.TempDir()})
	if err == nil {
		t.Fatal("no image anywhere: no error")
	}
	for _, want := range []string{"no local build", "vmdock image import FILE", BaseURLEnv, "--image PATH", "`make image-arm64`", "vmdock-arm64.tar.zst"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// `make image` builds amd64 on any host: the advice follows the guest.
	_, err = Ensure(context.Background(), "", "amd64", Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "`make image`") || strings.Contains(err.Error(), "image-arm64") || !strings.Contains(err.Error(), "vmdock-amd64.tar.zst") {
		t.Errorf("amd64 advice: %v, want `make image` and vmdock-amd64.tar.zst", err)
	}
}

func TestBaseURLPrecedenceAndCheck(t *testing.T) {
	old := BaseURL
	BaseURL = "https://build.example/rel"
	t.Cleanup(func() { BaseURL = old })
	t.Setenv(BaseURLEnv, "")
	if b, from := EffectiveBaseURL(""); b != "https://build.example/rel/" || from != "build default" {
		t.Errorf("build default: %q %q", b, from)
	}
	if b, from := EffectiveBaseURL("https://cfg.example/"); b != "https://cfg.example/" || from != "imageBaseURL" {
		t.Errorf("config: %q %q", b, from)
	}
	t.Setenv(BaseURLEnv, "http://127.0.0.1:8080/x")
	if b, from := EffectiveBaseURL("https://cfg.example/"); b != "http://127.0.0.1:8080/x/" || from != BaseURLEnv {
		t.Errorf("env: %q %q", b, from)
	}
	for u, ok := range map[string]bool{
		"https://example.com/images/": true, "http://127.0.0.1:9/": true, "http://[::1]:9/": true, "http://localhost/": true,
		"http://example.com/": false, "http://10.0.0.1/": false, "ftp://example.com/": false, "example.com/x": false, "": false,
	} {
		if err := CheckBaseURL(u); (err == nil) != ok {
			t.Errorf("CheckBaseURL(%q) = %v, want ok=%v", u, err, ok)
		}
	}
}

func TestImportedVMDockImageBecomesTheDefault(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	cache := t.TempDir()
	opts := Options{CacheDir: cache, BaseURL: r.base()}
	p := filepath.Join(t.TempDir(), "mine.tar.zst")
	members := fakeImage(t, "amd64", func(m *Manifest) { m.Cmdline = "imported" })
	writeArchive(t, p, members)
	e, err := Import(context.Background(), p, "amd64", Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	d, err := ResolveDefault(context.Background(), "amd64", opts)
	if err != nil || d.Source != SourceImport || d.Digest != e.Digest || !d.Cached {
		t.Fatalf("ResolveDefault after import = %+v, %v", d, err)
	}
	img, err := Ensure(context.Background(), "", "amd64", opts)
	if err != nil || img.Cmdline != "imported" {
		t.Fatalf("default start after import = %+v, %v", img, err)
	}
	c, _ := OpenCache(cache)
	if got, _ := c.Find(e.Digest); len(got) != 1 || got[0].Source != p {
		t.Errorf("entry after a start = %+v, want its source %s kept", got, p)
	}
	// A local build newer than the import wins.
	build := filepath.Join(c.BuiltDir(), "vmdock-amd64.tar.zst")
	writeArchive(t, build, fakeImage(t, "amd64", func(m *Manifest) { m.Cmdline = "built" }))
	future := time.Now().Add(time.Minute)
	os.Chtimes(build, future, future)
	if d, err := ResolveDefault(context.Background(), "amd64", opts); err != nil || d.Source != SourceLocalBuild || d.Path != build {
		t.Errorf("newer build: ResolveDefault = %+v, %v", d, err)
	}
	past := time.Now().Add(-time.Hour)
	os.Chtimes(build, past, past)
	if d, err := ResolveDefault(context.Background(), "amd64", opts); err != nil || d.Source != SourceImport {
		t.Errorf("older build: ResolveDefault = %+v, %v; want the import", d, err)
	}
	// Prune keeps the default even when no instance uses it.
	var used Used
	used.AddDefaults(context.Background(), opts)
	if removed, err := c.Prune(used); err != nil || len(removed) != 0 {
		t.Errorf("prune removed %+v (%v); the default must stay", removed, err)
	}
}

func TestPinnedImageIsKept(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	cache := t.TempDir()
	opts := Options{CacheDir: cache, BaseURL: r.base()}
	first, err := Ensure(context.Background(), "", "amd64", opts)
	if err != nil {
		t.Fatal(err)
	}
	// A newer release: a new instance gets it, a pinned one keeps its own.
	next := newReleaseWith(t, func(m *Manifest) { m.BuildTime = "2027-01-01T00:00:00Z" }, "amd64")
	r.mu.Lock()
	r.files = next.files
	r.mu.Unlock()
	pinned := opts
	pinned.Pin = first.Digest
	img, err := Ensure(context.Background(), "", "amd64", pinned)
	if err != nil || img.Digest != first.Digest {
		t.Fatalf("pinned Ensure = %+v, %v; want %s", img, err, first.Digest)
	}
	// Pinned to an image the cache lost, while the default moved on.
	c, _ := OpenCache(cache)
	if err := c.Remove(first.Digest); err != nil {
		t.Fatal(err)
	}
	_, err = Ensure(context.Background(), "", "amd64", pinned)
	if err == nil || !strings.Contains(err.Error(), "--upgrade-image") || !strings.Contains(err.Error(), first.Digest) {
		t.Errorf("lost pinned image: err = %v", err)
	}
	if _, err := c.openCached(first.Digest); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("openCached of a removed image: %v", err)
	}
}

func TestPruneKeepsRecentPartialDownloads(t *testing.T) {
	c, _ := OpenCache(t.TempDir())
	tmp := filepath.Join(c.Dir, "tmp")
	files := map[string]time.Duration{
		PartialPrefix + "sha256-new": 2 * 24 * time.Hour, PartialPrefix + "sha256-old": 8 * 24 * time.Hour,
		"import-123": 2 * 24 * time.Hour, "import-456": time.Hour,
	}
	for name, age := range files {
		p := filepath.Join(tmp, name)
		os.WriteFile(p, []byte("x"), 0o644)
		at := time.Now().Add(-age)
		os.Chtimes(p, at, at)
	}
	if _, err := c.Prune(Used{}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(dirEntries(t, tmp), ",")
	if got != "import-456,"+PartialPrefix+"sha256-new" {
		t.Errorf("tmp after prune = %s", got)
	}
}

func TestAdoptLegacyCache(t *testing.T) {
	root := t.TempDir()
	legacy := filepath.Join(root, "Caches", "vmdock")
	dir := filepath.Join(root, "Application Support", "vmdock")
	os.MkdirAll(filepath.Join(legacy, "blobs"), 0o755)
	os.WriteFile(filepath.Join(legacy, "blobs", "x"), []byte("image"), 0o644)
	if got := adoptLegacyCache(dir, legacy); got != dir {
		t.Fatalf("adoptLegacyCache = %s, want %s", got, dir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "blobs", "x")); err != nil || string(b) != "image" {
		t.Errorf("the old cache's image is not in the new place: %v", err)
	}
	// Both exist: the new one is used and the old one left alone.
	os.MkdirAll(legacy, 0o755)
	if got := adoptLegacyCache(dir, legacy); got != dir {
		t.Errorf("with both: %s", got)
	}
	if got := adoptLegacyCache(dir, ""); got != dir {
		t.Errorf("no legacy: %s", got)
	}
}

// cachedData lists the files in a cache that hold image data (not its
// empty folders, lock or saved manifests).
func cachedData(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, sub := range []string{"blobs", "unpacked", "tmp", "defaults"} {
		filepath.WalkDir(filepath.Join(dir, sub), func(p string, de fs.DirEntry, err error) error {
			if err == nil && !de.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// A relative path given to `start --image` names a file in the user's
// folder; the host agent, which resolves the saved reference, runs
// elsewhere.
func TestAbsRefMakesRelativePathsAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("local.tar.zst", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"out/vmdock-amd64.tar.zst":          filepath.Join(dir, "out", "vmdock-amd64.tar.zst"),
		"./x.tar.zst":                       filepath.Join(dir, "x.tar.zst"),
		"local.tar.zst":                     filepath.Join(dir, "local.tar.zst"),
		"my-imported":                       "my-imported",
		"vmdock":                            "vmdock",
		"":                                  "",
		"/abs/img.tar.zst":                  "/abs/img.tar.zst",
		"https://example.test/i.tar.zst":    "https://example.test/i.tar.zst",
		"file:///srv/images/vmdock.tar.zst": "file:///srv/images/vmdock.tar.zst",
	} {
		got, err := AbsRef(ref)
		if err != nil || got != want {
			t.Errorf("AbsRef(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
}
