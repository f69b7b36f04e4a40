package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/images/imagetest"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/store"
)

// An imported vmdock image is what a start without --image uses: `image
// list` marks it and shows where it came from, `status` shows the image an
// instance is pinned to and a newer default, and prune keeps the default.
func TestImportedImageIsTheDefault(t *testing.T) {
	home, _ := env(t)
	fake := installFake(t)
	t.Setenv("VMDOCK_CACHE", filepath.Join(t.TempDir(), "cache"))
	t.Setenv("VMDOCK_IMAGE_DIR", "")
	t.Setenv(images.BaseURLEnv, "")
	t.Chdir(t.TempDir()) // no checkout build in sight
	arch := testHost.Arch
	first := filepath.Join(t.TempDir(), "first.tar.zst")
	if err := imagetest.Write(first, imagetest.Members(arch, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := run("image", "import", first); err != nil {
		t.Fatal(err)
	}
	var rows []imageRow
	out, err := run("image", "list", "--json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("image list --json: %v\n%s", err, out)
	}
	if len(rows) != 1 || !rows[0].Default || rows[0].Source != first || rows[0].Kind != images.KindVMDock {
		t.Fatalf("image list = %+v (%v), want the import marked default with its path", rows, err)
	}

	// An instance made from it is pinned to it; a later import is newer.
	if _, err := run("start"); err != nil || len(fake.starts) != 1 {
		t.Fatalf("start: %v", err)
	}
	inst := &store.Instance{Name: "default", Dir: filepath.Join(home, "default")}
	if err := os.WriteFile(filepath.Join(inst.Dir, images.DigestFileName), []byte(rows[0].Digest+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(t.TempDir(), "second.tar.zst")
	if err := imagetest.Write(second, imagetest.Members(arch, func(m map[string]any) { m["buildTime"] = "2027-01-01T00:00:00Z" })); err != nil {
		t.Fatal(err)
	}
	if _, err := run("image", "import", second); err != nil {
		t.Fatal(err)
	}
	out, _ = run("status", "--json")
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if st.Image == nil || st.Image.Pinned != rows[0].Digest || st.Image.Newer == nil || st.Image.Newer.Source != images.SourceImport || st.Image.Newer.Digest == rows[0].Digest {
		t.Errorf("status image = %+v, want pinned to the first import with the second as newer", st.Image)
	}
	if out, _ := run("status"); !strings.Contains(out, "--upgrade-image") {
		t.Errorf("status text does not say how to upgrade:\n%s", out)
	}
	// Prune keeps the pinned image (an instance uses it) and the default.
	if out, err := run("image", "prune"); err != nil || strings.Contains(out, "removed") {
		t.Errorf("prune = %q, %v; want nothing removed", out, err)
	}
}

// --upgrade-image asks the host agent for a new root disk; a start that
// fails takes the request back, so a later plain start does not upgrade.
func TestStartUpgradeImageRequest(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	marker := filepath.Join(home, "default", "upgrade-image")
	var sawMarker bool
	startVM = func(_ context.Context, inst *store.Instance, _ config.Config, _ instance.StartOptions) error {
		_, err := os.Stat(inst.UpgradeImagePath())
		sawMarker = err == nil
		return os.ErrDeadlineExceeded
	}
	if _, err := run("start", "--upgrade-image"); err == nil {
		t.Fatal("the fake start's failure was not reported")
	}
	if !sawMarker {
		t.Error("the host agent would not see the upgrade request")
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("upgrade request left behind after a failed start: %v", err)
	}
}
