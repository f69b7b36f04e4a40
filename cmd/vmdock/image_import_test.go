package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/vmdock/vmdock/images/imagetest"
)

// `image import` refuses a file that is no image in one line naming it,
// and adds nothing to the list.
func TestImageImportRefusesNonImages(t *testing.T) {
	env(t)
	dir := t.TempDir()
	t.Setenv("VMDOCK_CACHE", filepath.Join(dir, "cache"))
	for name, data := range map[string][]byte{
		"notes.txt":  []byte("meeting notes\n"),
		"empty.img":  nil,
		"zeros.img":  make([]byte, 1<<20),
		"hi.tar.zst": zstdBytes(t, []byte("hi\n")),
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := run("image", "import", p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("import %s: err = %v, want one line naming the file", name, err)
		}
	}
	out, err := run("image", "list", "--json")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("image list after refused imports = %q, %v; want []", out, err)
	}
}

// Without --arch a vmdock image is listed for its manifest's arch; an
// --arch that conflicts is refused.
func TestImageImportArchFromManifest(t *testing.T) {
	env(t)
	dir := t.TempDir()
	t.Setenv("VMDOCK_CACHE", filepath.Join(dir, "cache"))
	p := filepath.Join(dir, "vmdock-arm64.tar.zst")
	if err := os.WriteFile(p, tinyVMDockImage(t, "arm64"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run("image", "import", "--arch", "amd64", p); err == nil || !strings.Contains(err.Error(), "is for arm64") {
		t.Errorf("conflicting --arch: err = %v", err)
	}
	out, err := run("image", "import", p)
	if err != nil || !strings.HasPrefix(out, "imported sha256:") || !strings.HasSuffix(out, " (vmdock, arm64)\n") {
		t.Errorf("import = %q, %v; want imported <digest> (vmdock, arm64)", out, err)
	}
}

func zstdBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	return zw.EncodeAll(b, nil)
}

// tinyVMDockImage is imagetest's vmdock archive for arch.
func tinyVMDockImage(t *testing.T, arch string) []byte {
	t.Helper()
	b, err := imagetest.Encode(imagetest.Members(arch, nil))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
