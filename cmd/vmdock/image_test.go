package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `image import` refuses a qcow2 that start could not boot, with the
// reason, and leaves the cache as it was.
func TestImageImportRefusesBackingFile(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed")
	}
	env(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	t.Setenv("VMDOCK_CACHE", cache)
	base, img := filepath.Join(dir, "base.raw"), filepath.Join(dir, "child.qcow2")
	if err := os.WriteFile(base, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", img).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	// The cache as any import leaves it: folders and lock file.
	if _, err := run("image", "import", filepath.Join(dir, "missing")); err == nil {
		t.Fatal("import of a missing file accepted")
	}
	before := treeHash(t, cache)
	_, err := run("image", "import", "--name", "child", img)
	if err == nil || !strings.Contains(err.Error(), "backing file") || !strings.Contains(err.Error(), img) {
		t.Fatalf("err = %v, want a refusal naming the file and its backing file", err)
	}
	if treeHash(t, cache) != before {
		t.Error("refused import changed the cache")
	}
	out, err := run("image", "list", "--json")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("image list after a refused import = %q, %v; want []", out, err)
	}
}
