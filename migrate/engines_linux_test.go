package migrate

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/vmdock/vmdock/migrate/migratetest"
)

// testEngineDir holds the test engines' folders, one made per run
// (migratetest.Start), so two runs at once keep apart. Not the fixed
// folder older versions of this test emptied at their start.
const testEngineDir = "/tmp/vmdock-migrate-runs"

var (
	enginesOnce  sync.Once
	enginesErr   error
	testEngines  *migratetest.Engines
	sourceEngine *Engine
	targetEngine *Engine
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testEngines != nil {
		testEngines.Stop()
	}
	os.Exit(code)
}

// requireEngines starts the two engines once per package run; without
// dockerd or root it skips, or fails under CI=true, where hack/deps.sh
// installed dockerd and the suite runs as root.
func requireEngines(t *testing.T) (*Engine, *Engine) {
	t.Helper()
	enginesOnce.Do(func() {
		testEngines, enginesErr = migratetest.Start(testEngineDir, "vmdock-migrate-test", "src", "dst")
		if enginesErr == nil {
			sourceEngine, targetEngine = NewEngine(testEngines.List[0].Socket), NewEngine(testEngines.List[1].Socket)
		}
	})
	if enginesErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("test docker engines: %v", enginesErr)
		}
		t.Skipf("test docker engines: %v", enginesErr)
	}
	return sourceEngine, targetEngine
}

// importImage makes an image from a tar of files with
// POST /images/create?fromSrc=-, so nothing is pulled.
func importImage(t *testing.T, e *Engine, repo, tag string, files map[string][]byte) {
	t.Helper()
	archive, err := migratetest.ImageTar(files)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	resp, err := e.Do(context.Background(), http.MethodPost, "/images/create", q, bytes.NewReader(archive), "application/x-tar")
	if err != nil {
		t.Fatalf("import %s:%s: %v", repo, tag, err)
	}
	defer resp.Body.Close()
	if err := loadStreamError(resp.Body); err != nil {
		t.Fatalf("import %s:%s: %v", repo, tag, err)
	}
}

func mustCall(t *testing.T, e *Engine, method, path string, query url.Values, in, out any) {
	t.Helper()
	if err := e.Call(context.Background(), method, path, query, in, out); err != nil {
		t.Fatal(err)
	}
}
