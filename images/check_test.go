package images

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/vmdock/vmdock/images/imagetest"
	"github.com/vmdock/vmdock/internal/atomicfile"
)

func zstdOf(t testing.TB, b []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarOf(t testing.TB, members []member) []byte {
	t.Helper()
	b, err := imagetest.Tar(toImagetest(members))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// headerOnly is a tar header claiming size bytes for name, and no data:
// a check that reads before it looks at the size sees a short archive.
func headerOnly(t testing.TB, name string, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatGNU}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes() // not closed: the data never comes
}

// paxFlood is n PAX extended headers in a row, which archive/tar reads
// one after the other inside a single Next.
func paxFlood(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: "vmlinuz", Mode: 0o644, Typeflag: tar.TypeReg, PAXRecords: map[string]string{"comment": strings.Repeat("x", 400)}}
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	pax := b[:len(b)-512] // the PAX header and its records; the file header follows
	return bytes.Repeat(pax, n)
}

func vmdockArchive(t testing.TB, members []member) []byte {
	return zstdOf(t, tarOf(t, members))
}

// hostileImages are files `vmdock image import` must refuse, with what the
// refusal must say.
func hostileImages(t *testing.T) []struct {
	name string
	data []byte
	want string
} {
	good := vmdockArchive(t, fakeImage(t, "amd64", nil))
	symlink := func() []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: "vmlinuz", Linkname: "/etc/shadow", Typeflag: tar.TypeSymlink})
		tw.Close()
		return buf.Bytes()
	}()
	return []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not a disk image (0 bytes"},
		{"zeros", make([]byte, 1<<20), "not a disk image (no MBR or GPT"},
		{"text", []byte("root:x:0:0:root:/root:/bin/bash\n"), "not a disk image (32 bytes"},
		{"zstd, not a tar", zstdOf(t, []byte("hi\n")), "not a vmdock image (the tar archive inside the zstd stream is cut short"},
		{"zstd of nothing", zstdOf(t, nil), "no manifest.json in the archive"},
		{"truncated", good[:len(good)/2], "the zstd stream is cut short"},
		{"wrong arch", vmdockArchive(t, fakeImage(t, "s390x", nil)), `architecture "s390x" not supported`},
		{"no manifest", vmdockArchive(t, fakeImage(t, "amd64", nil)[1:]), "no manifest.json in the archive"},
		{"no kernel", vmdockArchive(t, append(fakeImage(t, "amd64", nil)[:2], fakeImage(t, "amd64", nil)[3])), "archive has no vmlinuz"},
		{"member outside the layout", vmdockArchive(t, append(fakeImage(t, "amd64", nil), member{"etc/passwd", []byte("x")})), `unexpected member "etc/passwd"`},
		{"path escape", vmdockArchive(t, []member{{"../disk.raw", []byte("x")}}), `unexpected member "../disk.raw"`},
		{"symlink", zstdOf(t, symlink), `member "vmlinuz" is not a regular file`},
		{"twice", vmdockArchive(t, append(fakeImage(t, "amd64", nil), member{"vmlinuz", []byte("kernel")})), `member "vmlinuz" appears twice`},
		{"digest mismatch", vmdockArchive(t, fakeImage(t, "amd64", func(m *Manifest) { m.Files["initrd.img"] = strings.Repeat("0", 64) })), "initrd.img: digest mismatch"},
		{"manifest not json", vmdockArchive(t, append([]member{{"manifest.json", []byte("{")}}, fakeImage(t, "amd64", nil)[1:]...)), "manifest.json: unexpected end of JSON input"},
		{"huge kernel", zstdOf(t, headerOnly(t, "vmlinuz", 300<<20)), `member "vmlinuz" claims 300 MiB, more than the 256 MiB a kernel may have`},
		{"huge initrd", zstdOf(t, headerOnly(t, "./initrd.img", 257<<20)), `member "initrd.img" claims 257 MiB, more than the 256 MiB an initrd may have`},
		{"huge manifest", zstdOf(t, headerOnly(t, "manifest.json", 2<<20)), "more than the 1 MiB a manifest may have"},
		{"huge disk", zstdOf(t, headerOnly(t, "disk.raw", 65<<30)), `member "disk.raw" claims 65 GiB, more than the 64 GiB a disk may have`},
		{"endless pax headers", zstdOf(t, paxFlood(t, 5000)), "tar headers of one member run past 4 MiB"},
		{"zstd window too large", zstdOf(t, tarOf(t, fakeImage(t, "amd64", nil)), zstd.WithWindowSize(256<<20), zstd.WithSingleSegment(false)), "a zstd window larger than the 128 MiB accepted"},
	}
}

// Every hostile file is refused from a path and from a URL, in one line
// naming the file and the reason, and leaves the cache as it was.
func TestImportRefusesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	imgs := hostileImages(t)
	files := map[string][]byte{}
	for _, img := range imgs {
		files["/"+img.name] = img.data
	}
	srv := newServer(t, files, nil)
	if _, err := Import(context.Background(), filepath.Join(dir, "missing"), "", Options{CacheDir: cache}); err == nil {
		t.Fatal("import of a missing file accepted")
	}
	before := strings.Join(cacheFiles(t, cache), " ")

	for i, img := range imgs {
		t.Run(img.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.Repeat("f", i+1)+".img")
			if err := os.WriteFile(p, img.data, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, ref := range []string{p, srv.URL + "/" + img.name} {
				e, err := Import(context.Background(), ref, "", Options{CacheDir: cache, Name: "bad"})
				if err == nil {
					t.Errorf("import of %s accepted: %+v", ref, e)
					continue
				}
				t.Log(err)
				for _, w := range []string{ref, img.want} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q is more than one line", err)
				}
				if got := strings.Join(cacheFiles(t, cache), " "); got != before {
					t.Errorf("refused import of %s changed the cache from [%s] to [%s]", ref, before, got)
				}
			}
		})
	}
}

// A vmdock image is unpacked once, by the import's check, and start uses
// those files; its arch is its manifest's.
func TestImportVMDockImage(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	p := filepath.Join(dir, "vmdock.tar.zst")
	writeArchive(t, p, fakeImage(t, "arm64", nil))

	e, err := Import(context.Background(), p, "", Options{CacheDir: cache, Name: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != KindVMDock || e.Arch != "arm64" {
		t.Errorf("entry = %+v, want kind vmdock, arch arm64", e)
	}
	if left := dirEntries(t, filepath.Join(cache, "tmp")); len(left) != 0 {
		t.Errorf("left in tmp: %v", left)
	}
	c, _ := OpenCache(cache)
	d, _ := ParseDigest(e.Digest)
	disk := filepath.Join(c.unpackDir(d), "disk.raw")
	fi, err := os.Stat(disk)
	if err != nil {
		t.Fatalf("import did not leave the unpacked image: %v", err)
	}
	img, err := c.open(e)
	if err != nil {
		t.Fatal(err)
	}
	if fi2, err := os.Stat(img.Disk); err != nil || img.Disk != disk || !os.SameFile(fi, fi2) {
		t.Errorf("open unpacked the image again (disk %s, err %v)", img.Disk, err)
	}
	if img.Arch != "arm64" {
		t.Errorf("image arch %q", img.Arch)
	}

	// The same bytes again, with an arch that conflicts: refused, and the
	// entry stays as the first import made it.
	entryBefore, _ := os.ReadFile(c.metaPath(d))
	filesBefore := strings.Join(cacheFiles(t, cache), " ")
	_, err = Import(context.Background(), p, "amd64", Options{CacheDir: cache, Name: "other"})
	if err == nil || !strings.Contains(err.Error(), "is for arm64") || !strings.Contains(err.Error(), "not amd64") || !strings.Contains(err.Error(), p) {
		t.Errorf("conflicting arch: err = %v", err)
	}
	if entryAfter, _ := os.ReadFile(c.metaPath(d)); !bytes.Equal(entryAfter, entryBefore) {
		t.Errorf("refused import changed the entry:\n%s\nto\n%s", entryBefore, entryAfter)
	}
	if got := strings.Join(cacheFiles(t, cache), " "); got != filesBefore {
		t.Errorf("refused import changed the cache from [%s] to [%s]", filesBefore, got)
	}

	// New bytes with a conflicting arch leave nothing behind.
	q := filepath.Join(dir, "other.tar.zst")
	writeArchive(t, q, fakeImage(t, "arm64", func(m *Manifest) { m.Cmdline = "other" }))
	if _, err := Import(context.Background(), q, "amd64", Options{CacheDir: cache}); err == nil || !strings.Contains(err.Error(), "is for arm64") {
		t.Errorf("conflicting arch: err = %v", err)
	}
	if got := strings.Join(cacheFiles(t, cache), " "); got != filesBefore {
		t.Errorf("refused import changed the cache from [%s] to [%s]", filesBefore, got)
	}

	// A matching arch is fine, and so is a download.
	if e, err := Import(context.Background(), q, "arm64", Options{CacheDir: cache}); err != nil || e.Arch != "arm64" {
		t.Errorf("import with its own arch = %+v, %v", e, err)
	}
	srv := newServer(t, map[string][]byte{"/img": vmdockArchive(t, fakeImage(t, "amd64", nil))}, nil)
	e, err = Import(context.Background(), srv.URL+"/img", "", Options{CacheDir: cache})
	if err != nil || e.Arch != "amd64" {
		t.Fatalf("download import = %+v, %v", e, err)
	}
	d, _ = ParseDigest(e.Digest)
	if _, err := checkUnpacked(c.unpackDir(d)); err != nil {
		t.Errorf("downloaded image not unpacked: %v", err)
	}
}

func TestImportRawDiskArch(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(p, rawDisk("arch"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ arch, want string }{{"", runtime.GOARCH}, {"arm64", "arm64"}, {"amd64", "amd64"}} {
		e, err := Import(context.Background(), p, tt.arch, Options{CacheDir: filepath.Join(dir, "cache-"+tt.arch)})
		if err != nil || e.Kind != KindRaw || e.Arch != tt.want {
			t.Errorf("import with arch %q = %+v, %v; want raw for %s", tt.arch, e, err, tt.want)
		}
	}
	if _, err := Import(context.Background(), p, "s390x", Options{CacheDir: filepath.Join(dir, "cache")}); err == nil || !strings.Contains(err.Error(), `"s390x" not supported`) {
		t.Errorf("arch s390x: err = %v", err)
	}
}

// Bytes an older vmdock took without a look are checked when imported
// again, and the refusal leaves their entry as it was.
func TestImportRechecksCachedBytes(t *testing.T) {
	dir := t.TempDir()
	text := []byte("meeting notes\n")
	p := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(p, text, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCache(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := ParseDigest(sha256Of(text))
	if err := os.WriteFile(c.blobPath(d), text, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.writeEntry(Entry{Digest: d.String(), Name: "old", Source: p, Kind: KindRaw, Arch: "amd64"}); err != nil {
		t.Fatal(err)
	}
	entry, _ := os.ReadFile(c.metaPath(d))
	Import(context.Background(), filepath.Join(dir, "missing"), "", Options{CacheDir: c.Dir}) // makes the lock file
	before := strings.Join(cacheFiles(t, c.Dir), " ")
	_, err = Import(context.Background(), p, "", Options{CacheDir: c.Dir, Digest: d.String(), Name: "new"})
	if err == nil || !strings.Contains(err.Error(), "not a disk image") || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want notes.txt refused as no disk image", err)
	}
	if got, _ := os.ReadFile(c.metaPath(d)); !bytes.Equal(got, entry) {
		t.Errorf("entry changed from %s to %s", entry, got)
	}
	if got := strings.Join(cacheFiles(t, c.Dir), " "); got != before {
		t.Errorf("cache changed from [%s] to [%s]", before, got)
	}
}

// A vmdock archive for another arch than the one given is refused by the
// check itself: its bytes never reach blobs/, so not even a concurrent
// `vmdock image list` sees it, and the cache is left as it was. Bytes an
// older vmdock cached (blob and entry, no unpack) are refused in place.
func TestImportWrongArchNeverCommits(t *testing.T) {
	var committed []string
	commitBlob = func(tmp, dst string) error {
		committed = append(committed, dst)
		return atomicfile.Commit(tmp, dst)
	}
	t.Cleanup(func() { commitBlob = atomicfile.Commit })

	dir := t.TempDir()
	c, err := OpenCache(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	archive := vmdockArchive(t, fakeImage(t, "arm64", nil))
	p := filepath.Join(dir, "vmdock-arm64.tar.zst")
	if err := os.WriteFile(p, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, map[string][]byte{"/img": archive}, nil)
	Import(context.Background(), filepath.Join(dir, "missing"), "", Options{CacheDir: c.Dir}) // makes the lock file
	refuse := func(ref string) {
		t.Helper()
		before := strings.Join(cacheFiles(t, c.Dir), " ")
		_, err := Import(context.Background(), ref, "amd64", Options{CacheDir: c.Dir, Name: "wrong"})
		if err == nil || !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), "is for arm64 (its manifest says so), not amd64") || strings.Contains(err.Error(), "\n") {
			t.Errorf("import of %s with --arch amd64: err = %v, want one line naming it, arm64 and amd64", ref, err)
		}
		if len(committed) != 0 {
			t.Errorf("import of %s committed %v before refusing it", ref, committed)
		}
		if got := strings.Join(cacheFiles(t, c.Dir), " "); got != before {
			t.Errorf("refused import of %s changed the cache from [%s] to [%s]", ref, before, got)
		}
	}
	refuse(p)
	refuse(srv.URL + "/img")

	d, _ := ParseDigest(sha256Of(archive))
	if err := os.WriteFile(c.blobPath(d), archive, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.writeEntry(Entry{Digest: d.String(), Name: "old", Source: p, Kind: KindVMDock, Arch: "arm64"}); err != nil {
		t.Fatal(err)
	}
	refuse(p)

	// The seam is on the path a good import takes.
	os.Remove(c.blobPath(d))
	if _, err := Import(context.Background(), p, "arm64", Options{CacheDir: c.Dir}); err != nil || len(committed) != 1 {
		t.Errorf("import with the image's arch = %v, commits %v; want one", err, committed)
	}
}
