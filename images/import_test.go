package images

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// qemuImg runs qemu-img; LUKS creation times its key derivation and on a
// loaded machine sometimes cannot measure it and fails, so it retries.
func qemuImg(t *testing.T, args ...string) {
	t.Helper()
	for try := 1; ; try++ {
		out, err := exec.Command("qemu-img", args...).CombinedOutput()
		if err == nil {
			return
		}
		if try == 3 {
			t.Fatalf("qemu-img %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// refusedQCOW2s makes, with qemu-img, one qcow2 image of each kind that
// vmdock cannot boot, and returns them by the reason to expect.
func refusedQCOW2s(t *testing.T, dir string) []struct{ name, path, reason string } {
	t.Helper()
	base := filepath.Join(dir, "base.raw")
	if err := os.WriteFile(base, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	backing := filepath.Join(dir, "backing.qcow2")
	qemuImg(t, "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", backing)
	dataFile := filepath.Join(dir, "datafile.qcow2")
	qemuImg(t, "create", "-q", "-f", "qcow2", "-o", "data_file="+filepath.Join(dir, "ext.raw"), dataFile, "1M")
	luks := filepath.Join(dir, "luks.qcow2")
	qemuImg(t, "create", "-q", "-f", "qcow2", "--object", "secret,id=sec0,data=pw",
		"-o", "encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=100", luks, "1M")
	return []struct{ name, path, reason string }{
		{"backing file", backing, "backing file"},
		{"external data file", dataFile, "external data file"},
		{"encrypted", luks, "encrypted"},
	}
}

// cacheFiles lists every file and folder in the cache, for checking that a refused
// import added nothing, not even a temp file.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestImportRefusesUnbootableQCOW2(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	imgs := refusedQCOW2s(t, dir)

	files := map[string][]byte{}
	for _, img := range imgs {
		b, err := os.ReadFile(img.path)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+filepath.Base(img.path)] = b
	}
	srv := newServer(t, files, nil)
	// The cache as it is before any import: its folders and lock file.
	if _, err := Import(context.Background(), filepath.Join(dir, "missing"), "amd64", Options{CacheDir: cache}); err == nil {
		t.Fatal("import of a missing file accepted")
	}
	before := strings.Join(cacheFiles(t, cache), " ")

	for _, img := range imgs {
		for _, ref := range []string{img.path, srv.URL + "/" + filepath.Base(img.path)} {
			_, err := Import(context.Background(), ref, "amd64", Options{CacheDir: cache, Name: "bad"})
			if err == nil {
				t.Errorf("%s: import of %s accepted", img.name, ref)
				continue
			}
			if !strings.Contains(err.Error(), img.reason) {
				t.Errorf("%s: error %q does not name %q", img.name, err, img.reason)
			}
			if !errors.Is(err, ErrUnsafeImage) && !errors.Is(err, ErrEncryptedImage) {
				t.Errorf("%s: error %v is neither ErrUnsafeImage nor ErrEncryptedImage", img.name, err)
			}
			if got := strings.Join(cacheFiles(t, cache), " "); got != before {
				t.Errorf("%s: refused import of %s changed the cache files from [%s] to [%s]", img.name, ref, before, got)
			}
		}
	}

	// A standalone copy, as the error suggests, imports and converts.
	flat := filepath.Join(dir, "flat.qcow2")
	qemuImg(t, "convert", "-q", "-O", "qcow2", imgs[0].path, flat)
	e, err := Import(context.Background(), flat, "amd64", Options{CacheDir: cache, Name: "flat"})
	if err != nil {
		t.Fatalf("import of a standalone qcow2: %v", err)
	}
	if e.Kind != KindQCOW2 {
		t.Errorf("kind %q, want %q", e.Kind, KindQCOW2)
	}
	img, err := Ensure(context.Background(), "flat", "amd64", Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if err := PrepareDisk(img, filepath.Join(dir, "disk.raw"), 1<<20); err != nil {
		t.Errorf("prepare disk from the imported image: %v", err)
	}
}

// A raw disk is checked only for what EFI needs to boot it (size and a
// partition table); the rest of its bytes are the guest's.
func TestImportRawNeedsAPartitionTable(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	p := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(p, []byte("not a qcow2 at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if e, err := Import(context.Background(), p, "amd64", Options{CacheDir: cache}); err == nil || !strings.Contains(err.Error(), "not a disk image") {
		t.Fatalf("import of 18 bytes as raw = %+v, %v; want a refusal", e, err)
	}
	if err := os.WriteFile(p, rawDisk("not a qcow2 at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Import(context.Background(), p, "amd64", Options{CacheDir: cache})
	if err != nil || e.Kind != KindRaw {
		t.Fatalf("import raw = %+v, %v", e, err)
	}
}

// A file that starts like a qcow2 but whose header start would reject is
// refused at import too.
func TestImportRefusesBadQCOW2Header(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.qcow2")
	if err := os.WriteFile(p, append([]byte("QFI\xfb"), make([]byte, 200)...), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	_, err := Import(context.Background(), p, "amd64", Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "qcow2 version 0 not supported") {
		t.Fatalf("err = %v, want the bad version named", err)
	}
	if blobs, _ := os.ReadDir(filepath.Join(cache, "blobs")); len(blobs) != 0 {
		t.Errorf("refused import left %d files in blobs/", len(blobs))
	}
	if tmp, _ := os.ReadDir(filepath.Join(cache, "tmp")); len(tmp) != 0 {
		t.Errorf("refused import left %d files in tmp/", len(tmp))
	}
}
