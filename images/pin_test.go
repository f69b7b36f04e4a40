package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// buildPinned sets the build-time BaseURL and ManifestSHA256 for the test.
func buildPinned(t *testing.T, base, pin string) {
	t.Helper()
	oldBase, oldPin := BaseURL, ManifestSHA256
	BaseURL, ManifestSHA256 = base, pin
	t.Cleanup(func() { BaseURL, ManifestSHA256 = oldBase, oldPin })
}

// servedManifestSHA256 is the hex sha256 of the images.json r serves.
func (r *release) servedManifestSHA256() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.TrimPrefix(sha256Of(r.files["/rel/images.json"]), "sha256:")
}

const otherDigest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestPinnedBuildAcceptsItsReleaseManifest(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	for name, pin := range map[string]string{
		"hex":       r.servedManifestSHA256(),
		"prefixed":  "sha256:" + r.servedManifestSHA256(),
		"uppercase": strings.ToUpper(r.servedManifestSHA256()),
	} {
		t.Run(name, func(t *testing.T) {
			buildPinned(t, r.base(), pin)
			opts := Options{CacheDir: t.TempDir()}
			img, err := Ensure(context.Background(), "", "amd64", opts)
			if err != nil {
				t.Fatalf("pinned to the served manifest: %v", err)
			}
			if img.Kind != KindVMDock || img.Arch != "amd64" {
				t.Errorf("image = %+v", img)
			}
		})
	}
}

func TestPinnedBuildRefusesAnotherManifest(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	served := "sha256:" + r.servedManifestSHA256()
	buildPinned(t, r.base(), otherDigest)
	cache := t.TempDir()
	_, err := Ensure(context.Background(), "", "amd64", Options{CacheDir: cache})
	if err == nil {
		t.Fatal("a manifest with another digest was accepted")
	}
	msg := err.Error()
	for _, want := range []string{served, "sha256:" + otherDigest, r.base() + "images.json", BaseURLEnv} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	if _, err := ResolveDefault(context.Background(), "amd64", Options{CacheDir: cache}); err == nil {
		t.Error("ResolveDefault (doctor, image list) accepted the manifest a start refuses")
	}
	if left := cachedData(t, cache); len(left) != 0 {
		t.Errorf("a refused manifest left %v in the cache", left)
	}
}

func TestPinAppliesToTheSavedCopyAndToChangedManifests(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	buildPinned(t, r.base(), r.servedManifestSHA256())
	cache := t.TempDir()
	opts := Options{CacheDir: cache}
	if _, err := ResolveDefault(context.Background(), "amd64", opts); err != nil {
		t.Fatal(err)
	}
	// The files at the base URL are replaced: the copy fetched before is
	// not a way around the pin either.
	m := ReleaseManifest{ImageFormat: ImageFormat, Images: map[string]ReleaseImage{
		"amd64": {File: "vmdock-amd64.tar.zst", Size: 10, SHA256: strings.Repeat("ab", 32)}}}
	r.setManifest(t, m)
	if _, err := ResolveDefault(context.Background(), "amd64", opts); err == nil || !strings.Contains(err.Error(), "pinned to") {
		t.Errorf("a replaced manifest: err = %v, want the pin refusal", err)
	}
	// Offline, the saved copy (the release's own) still works...
	r.mu.Lock()
	r.down = true
	r.mu.Unlock()
	if _, err := ResolveDefault(context.Background(), "amd64", opts); err != nil {
		t.Errorf("offline with the release's manifest saved: %v", err)
	}
	// ...but not once it was changed on disk.
	c, _ := OpenCache(cache)
	saved := c.savedManifestPath(r.base())
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saved, append(b, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ResolveDefault(context.Background(), "amd64", opts)
	if err == nil || !strings.Contains(err.Error(), "copy fetched earlier") || !strings.Contains(err.Error(), "pinned to") {
		t.Errorf("changed saved copy: err = %v, want the pin refusal naming the copy", err)
	}
}

func TestOverridesImportsAndLocalBuildsAreNotPinned(t *testing.T) {
	noLocalImages(t)
	r := newRelease(t, "amd64")
	buildPinned(t, "https://release.invalid/v1/", otherDigest)

	if _, err := Ensure(context.Background(), "", "amd64", Options{CacheDir: t.TempDir(), BaseURL: r.base()}); err != nil {
		t.Errorf("imageBaseURL in the config: %v", err)
	}
	t.Setenv(BaseURLEnv, r.base())
	if _, err := Ensure(context.Background(), "", "amd64", Options{CacheDir: t.TempDir()}); err != nil {
		t.Errorf("%s: %v", BaseURLEnv, err)
	}
	t.Setenv(BaseURLEnv, "")

	cache := t.TempDir()
	p := filepath.Join(t.TempDir(), "mine.tar.zst")
	writeArchive(t, p, fakeImage(t, "amd64", nil))
	if _, err := Import(context.Background(), p, "amd64", Options{CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	if d, err := ResolveDefault(context.Background(), "amd64", Options{CacheDir: cache}); err != nil || d.Source != SourceImport {
		t.Errorf("an import in a pinned build: %+v, %v", d, err)
	}

	dir := t.TempDir()
	writeArchive(t, filepath.Join(dir, "vmdock-amd64.tar.zst"), fakeImage(t, "amd64", nil))
	t.Setenv("VMDOCK_IMAGE_DIR", dir)
	if d, err := ResolveDefault(context.Background(), "amd64", Options{CacheDir: t.TempDir()}); err != nil || d.Source != SourceLocalBuild {
		t.Errorf("VMDOCK_IMAGE_DIR in a pinned build: %+v, %v", d, err)
	}
}

func TestPinnedManifest(t *testing.T) {
	for pin, want := range map[string]string{
		"":                           "",
		otherDigest:                  "sha256:" + otherDigest,
		" SHA256:" + otherDigest:     "sha256:" + otherDigest,
		strings.ToUpper(otherDigest): "sha256:" + otherDigest,
	} {
		buildPinned(t, "", pin)
		if got, err := PinnedManifest(); err != nil || got != want {
			t.Errorf("ManifestSHA256 %q: %q, %v; want %q", pin, got, err, want)
		}
	}
	for _, bad := range []string{"abc", strings.Repeat("g", 64), "sha512:" + otherDigest} {
		buildPinned(t, "", bad)
		if _, err := PinnedManifest(); err == nil || !strings.Contains(err.Error(), "IMAGE_MANIFEST_SHA256") {
			t.Errorf("ManifestSHA256 %q: err = %v, want a refusal naming IMAGE_MANIFEST_SHA256", bad, err)
		}
	}
}
