package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func fill(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// The new folder replaces the old one whole: no file of the old is left,
// and the temp folder is gone.
func TestSwapDirReplacesTheOldFolder(t *testing.T) {
	root := t.TempDir()
	dst, tmp := filepath.Join(root, "certs"), filepath.Join(root, "certs.new")
	fill(t, dst, map[string]string{"old.crt": "old", "both.crt": "old"})
	fill(t, tmp, map[string]string{"both.crt": "new", "new.crt": "new"})
	if err := SwapDir(tmp, dst); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dst); len(got) != 2 || got[0] != "both.crt" || got[1] != "new.crt" {
		t.Errorf("dst holds %v, want [both.crt new.crt]", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "both.crt")); string(b) != "new" {
		t.Errorf("both.crt = %q, want the new content", b)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("tmp still there: %v", err)
	}
}

func TestSwapDirWithNoOldFolder(t *testing.T) {
	root := t.TempDir()
	dst, tmp := filepath.Join(root, "unpacked"), filepath.Join(root, "unpacked.tmp-1")
	fill(t, tmp, map[string]string{"kernel": "k"})
	if err := SwapDir(tmp, dst); err != nil {
		t.Fatal(err)
	}
	if got := names(t, dst); len(got) != 1 || got[0] != "kernel" {
		t.Errorf("dst holds %v, want [kernel]", got)
	}
}

// A temp folder that is not there (a failed build) never costs the old one.
func TestSwapDirKeepsTheOldFolderWithoutANewOne(t *testing.T) {
	root := t.TempDir()
	dst := filepath.Join(root, "certs")
	fill(t, dst, map[string]string{"old.crt": "old"})
	if err := SwapDir(filepath.Join(root, "missing"), dst); err == nil {
		t.Fatal("SwapDir of a missing temp folder succeeded")
	}
	file := filepath.Join(root, "file")
	fill(t, root, map[string]string{"file": "x"})
	if err := SwapDir(file, dst); err == nil {
		t.Fatal("SwapDir of a file succeeded")
	}
	if got := names(t, dst); len(got) != 1 || got[0] != "old.crt" {
		t.Errorf("dst holds %v after failed swaps, want [old.crt]", got)
	}
}

// PlaceDir never replaces a folder with content: the first one placed wins.
func TestPlaceDirKeepsAFolderInPlace(t *testing.T) {
	root := t.TempDir()
	dst, tmp := filepath.Join(root, "ca"), filepath.Join(root, ".ca-2")
	fill(t, dst, map[string]string{"cert.pem": "first"})
	fill(t, tmp, map[string]string{"cert.pem": "second"})
	if err := PlaceDir(tmp, dst); err == nil {
		t.Fatal("PlaceDir over a folder with content succeeded")
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "cert.pem")); string(b) != "first" {
		t.Errorf("cert.pem = %q, want the first one kept", b)
	}
	if err := PlaceDir(tmp, filepath.Join(root, "fresh")); err != nil {
		t.Fatal(err)
	}
}
