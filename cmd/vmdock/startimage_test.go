package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/images"
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
