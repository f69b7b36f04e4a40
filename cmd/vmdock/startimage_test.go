package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/images/imagetest"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/store"
)

// noImageSources leaves a start only the image sources a test gives it:
// its own cache, no checkout build, no base URL.
func noImageSources(t *testing.T) (cache string) {
	t.Helper()
	cache = filepath.Join(t.TempDir(), "cache")
	t.Setenv("VMDOCK_CACHE", cache)
	t.Setenv("VMDOCK_IMAGE_DIR", "")
	t.Setenv(images.BaseURLEnv, "")
	t.Chdir(t.TempDir())
	prepareImage = prepareStartImage // installFake made it a no-op
	return cache
}

// A start that has no image to boot fails before the instance exists:
// no folder, no config.yaml to clean up or to trip over next time.
func TestStartWithoutAnImageCreatesNothing(t *testing.T) {
	home, _ := env(t)
	fake := installFake(t)
	noImageSources(t)
	_, err := run("start", "--cpus", "2")
	if err == nil || !strings.Contains(err.Error(), "no local build, no imported vmdock image") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("start without an image: err = %v, want the one-line no-image error", err)
	}
	if _, err := os.Stat(filepath.Join(home, "default")); !os.IsNotExist(err) {
		t.Errorf("the failed start left the instance folder: %v", err)
	}
	if len(fake.starts) != 0 {
		t.Errorf("the host agent was started %d times", len(fake.starts))
	}
}

// The default image is downloaded by the CLI, its progress on the start's
// own output, before the host agent is started; the host agent then finds
// it cached. A later start of the same instance boots the image its root
// disk came from and needs no network.
func TestStartDownloadsTheDefaultImageWithProgress(t *testing.T) {
	home, _ := env(t)
	fake := installFake(t)
	noImageSources(t)
	arch := testHost.Arch
	archive, err := imagetest.Encode(imagetest.Members(arch, nil))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	manifest, _ := json.Marshal(images.ReleaseManifest{ImageFormat: images.ImageFormat, Images: map[string]images.ReleaseImage{
		arch: {File: "vmdock-" + arch + ".tar.zst", Size: int64(len(archive)), SHA256: hex.EncodeToString(sum[:])},
	}})
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case down.Load():
			http.Error(w, "down", http.StatusServiceUnavailable)
		case r.URL.Path == "/rel/"+images.ReleaseManifestName:
			w.Write(manifest)
		case r.URL.Path == "/rel/vmdock-"+arch+".tar.zst":
			w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv(images.BaseURLEnv, srv.URL+"/rel/")

	var cachedAtSpawn bool
	startVM = func(ctx context.Context, inst *store.Instance, cfg config.Config, _ instance.StartOptions) error {
		fake.starts = append(fake.starts, cfg)
		d, err := images.ResolveDefault(ctx, cfg.Arch, images.Options{Offline: true})
		cachedAtSpawn = err == nil && d.Cached
		return nil
	}
	out, err := run("start")
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if !strings.Contains(out, "downloading the vmdock image for "+arch) || !strings.Contains(out, "fetch vmdock: 100%") {
		t.Errorf("start output does not show the download's progress:\n%s", out)
	}
	if len(fake.starts) != 1 || !cachedAtSpawn {
		t.Errorf("host agent started %d times, image cached then: %v; want once, after the download", len(fake.starts), cachedAtSpawn)
	}

	// The root disk exists now: the next start asks nothing of the network.
	inst := &store.Instance{Name: "default", Dir: filepath.Join(home, "default")}
	if err := os.WriteFile(inst.DiskPath(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	if out, err := run("start"); err != nil || strings.Contains(out, "downloading") {
		t.Errorf("a start with a root disk: %v\n%s", err, out)
	}
}
