package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Options tunes Ensure and Import.
type Options struct {
	Progress   io.Writer    // download progress; nil for none
	IsTTY      bool         // Progress is a terminal: draw a bar instead of lines
	CacheDir   string       // "" for DefaultCacheDir()
	HTTPClient *http.Client // nil for http.DefaultClient
	// BaseURL is the config's imageBaseURL: where published images are
	// ("" for the build's default; VMDOCK_IMAGE_BASE_URL overrides both).
	BaseURL string
	// Offline resolves the vmdock name from what this machine has,
	// without asking the network (status, image list, prune).
	Offline bool
	// Pin is the digest an existing instance was made from: Ensure returns
	// exactly that image, so the kernel always matches the root disk's
	// modules. ref is fetched only when it still resolves to it.
	Pin string
	// Digest, when set ("sha256:<hex>"), is what a path or URL reference must hash to.
	Digest string
	// Name is recorded for the fetched entry (`vmdock image import --name`).
	Name string
}

func (o Options) httpClient() *http.Client {
	if o.HTTPClient != nil {
		return o.HTTPClient
	}
	return http.DefaultClient
}

// Image is a cached, verified image ready to make an instance disk from.
// Kernel and Initrd are empty for bare disk images, which boot with EFI.
type Image struct {
	Dir        string // folder holding the image's files
	Disk       string // raw or qcow2 disk
	DiskFormat string // raw | qcow2
	Kernel     string
	Initrd     string
	Cmdline    string
	Arch       string
	Manifest   *Manifest // nil for bare disks
	Digest     string    // of the fetched file; instances record it in DigestFileName
	Kind       string    // KindVMDock, KindQCOW2 or KindRaw
}

// DigestFileName is the file in an instance folder recording the digest
// of the image it was made from, so prune keeps that image.
const DigestFileName = "image.digest"

// Ensure resolves ref for arch, fetches it into the cache unless a verified
// copy is there, unpacks a vmdock image, and returns where its files are.
// An empty ref means the vmdock image.
func Ensure(ctx context.Context, ref, arch string, opts Options) (*Image, error) {
	if err := checkArch(arch); err != nil {
		return nil, err
	}
	if ref == "" {
		ref = NameVMDock
	}
	c, err := OpenCache(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	unlock, err := c.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if opts.Pin != "" {
		if img, err := c.openCached(opts.Pin); err == nil {
			return checkImageArch(img, ref, arch)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	src, err := resolve(ctx, c, opts, ref, arch)
	if err != nil {
		return nil, err
	}
	if opts.Digest != "" {
		d, err := ParseDigest(opts.Digest)
		if err != nil {
			return nil, err
		}
		src.Digest = d
	}
	if err := checkPlainHTTP(src); err != nil {
		return nil, err
	}
	if opts.Pin != "" && src.Digest.String() != opts.Pin {
		now := src.Digest.String()
		if now == "" {
			now = src.String()
		}
		return nil, fmt.Errorf("the image this instance was made from (%s) is no longer cached, and %q now gives %s: `vmdock start --upgrade-image` remakes the root disk from it (the data disk, with images and volumes, is kept)",
			opts.Pin, ref, now)
	}
	if src.Origin == SourceImport {
		img, err := c.openCached(src.Digest.String())
		if err != nil {
			return nil, fmt.Errorf("imported image %s: %w", src.Digest, err)
		}
		return checkImageArch(img, ref, arch)
	}
	if opts.Name != "" {
		src.Name = opts.Name
	}
	e, err := c.fetch(ctx, opts, src)
	if err != nil {
		return nil, err
	}
	img, err := c.open(e)
	if err != nil {
		return nil, err
	}
	return checkImageArch(img, ref, arch)
}

func checkImageArch(img *Image, ref, arch string) (*Image, error) {
	if img.Arch != "" && img.Arch != arch {
		return nil, fmt.Errorf("image %q is for %s, not %s", ref, img.Arch, arch)
	}
	if img.Arch == "" {
		img.Arch = arch
	}
	return img, nil
}

// openCached opens the cached image with digest pin (a pinned or an
// imported one, whose entry must keep the source it came from). A vmdock image whose
// unpacked files are intact is used as it is: they were verified against
// the archive when unpacked, and hashing 1.3 GB at every start buys
// nothing. fs.ErrNotExist means it is not cached.
func (c *Cache) openCached(pin string) (*Image, error) {
	d, err := ParseDigest(pin)
	if err != nil {
		return nil, fmt.Errorf("pinned image: %w", err)
	}
	b, err := os.ReadFile(c.metaPath(d))
	if err != nil {
		return nil, fs.ErrNotExist
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fs.ErrNotExist
	}
	e.Digest = d.String()
	if e.Kind == KindVMDock {
		if _, err := checkUnpacked(c.unpackDir(d)); err == nil {
			return c.open(e)
		}
	}
	if ok, err := c.verifyBlob(d); err != nil {
		return nil, err
	} else if !ok {
		return nil, fs.ErrNotExist
	}
	return c.open(e)
}

// Import fetches ref into the cache under opts.Name, checked as its kind
// (a vmdock image is unpacked once, here, and start reuses that); an
// imported vmdock image becomes what a start without --image uses for
// its arch. arch "" means the image's own (a disk: the host's).
func Import(ctx context.Context, ref, arch string, opts Options) (Entry, error) {
	if err := checkImportArch(arch); err != nil {
		return Entry{}, err
	}
	c, err := OpenCache(opts.CacheDir)
	if err != nil {
		return Entry{}, err
	}
	unlock, err := c.lock()
	if err != nil {
		return Entry{}, err
	}
	defer unlock()
	src, err := resolve(ctx, c, opts, ref, orHostArch(arch))
	if err != nil {
		return Entry{}, err
	}
	if opts.Name != "" {
		src.Name = opts.Name
	}
	if opts.Digest != "" {
		if src.Digest, err = ParseDigest(opts.Digest); err != nil {
			return Entry{}, err
		}
	}
	if err := checkPlainHTTP(src); err != nil {
		return Entry{}, err
	}
	e, err := c.fetchImport(ctx, opts, src, arch)
	if err != nil {
		return Entry{}, err
	}
	if e.Kind == KindVMDock {
		// An imported vmdock image is how a machine that cannot build
		// one (a Mac) gets its default image.
		if err := c.setDefault(e.Arch, e.Digest); err != nil {
			return Entry{}, err
		}
	}
	return e, nil
}

// fetch makes sure the cache holds src's bytes, checked when fetched, and
// records their entry.
func (c *Cache) fetch(ctx context.Context, opts Options, src source) (Entry, error) {
	d, fi, err := c.fetchBlob(ctx, opts, src, "")
	if err != nil {
		return Entry{}, err
	}
	return c.record(src, d, fi)
}

// fetchBlob makes sure the cache holds src's bytes under their digest and
// that they still hash to it; a damaged copy is dropped and fetched again.
// Bytes fetched are checked by checkFetchedDisk (for arch, unless "")
// before they enter blobs/; bytes found there are taken as they are. fi
// is src.Path's, for record.
func (c *Cache) fetchBlob(ctx context.Context, opts Options, src source, arch string) (Digest, os.FileInfo, error) {
	var fi os.FileInfo
	if src.Path != "" {
		var err error
		if fi, err = os.Stat(src.Path); err != nil {
			return Digest{}, nil, fmt.Errorf("image %s: %w", src.Path, err)
		}
	}
	// Find the digest we expect without fetching: given, or remembered.
	want := src.Digest
	if want.IsZero() {
		if e, ok := c.bySource(src.String()); ok {
			if src.URL != "" || (fi != nil && e.SourceSize == fi.Size() && e.SourceModTime.Equal(fi.ModTime())) {
				want, _ = ParseDigest(e.Digest)
			}
		}
	}
	if !want.IsZero() {
		if ok, err := c.verifyBlob(want); err != nil {
			return Digest{}, nil, err
		} else if ok {
			return want, fi, nil
		}
	}

	var got Digest
	var err error
	if src.URL != "" {
		label := src.Name
		if label == "" {
			label = src.URL
		}
		got, _, err = c.download(ctx, opts, src.URL, src.Digest, src.Size, arch, "fetch "+label)
	} else {
		got, err = c.copyIn(src.Path, src.Digest, arch)
	}
	return got, fi, err
}

// verifyBlob re-hashes a cached blob. A missing blob is (false, nil); a
// damaged one is removed, with its unpacked files, and reported as missing.
func (c *Cache) verifyBlob(d Digest) (bool, error) {
	p := c.blobPath(d)
	got, err := hashFile(p, d.Algo)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check cached image: %w", err)
	}
	if got == d {
		return true, nil
	}
	slog.Warn("cached image is damaged; fetching it again", "file", p, "want", d.String(), "got", got.String())
	if err := c.Remove(d.String()); err != nil {
		return false, err
	}
	return false, nil
}

// copyIn copies a local file into the cache, hashing it on the way, and
// checks it (for arch, unless "") before it enters blobs/.
func (c *Cache) copyIn(path string, want Digest, arch string) (Digest, error) {
	in, err := os.Open(path)
	if err != nil {
		return Digest{}, fmt.Errorf("import %s: %w", path, err)
	}
	defer in.Close()
	tmp, err := c.tempFile("import-*")
	if err != nil {
		return Digest{}, err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	defer tmp.Close()
	algo := algoOf(want)
	h := Digest{Algo: algo}.newHash()
	if _, err := writeSparse(tmp, io.TeeReader(in, h)); err != nil {
		return Digest{}, fmt.Errorf("import %s: %w", path, err)
	}
	got := digestOf(algo, h)
	if !want.IsZero() && got != want {
		return Digest{}, fmt.Errorf("import %s: %w: want %s, got %s", path, ErrDigestMismatch, want, got)
	}
	if err := tmp.Close(); err != nil {
		return Digest{}, fmt.Errorf("import %s: %w", path, err)
	}
	_, settle, err := c.checkFetchedDisk(tmp.Name(), got, arch)
	if err != nil {
		return Digest{}, fmt.Errorf("import %s: %w", path, err)
	}
	if err := settle(commitBlob(tmp.Name(), c.blobPath(got))); err != nil {
		return Digest{}, fmt.Errorf("import %s: %w", path, err)
	}
	return got, nil
}

// record writes (or refreshes) the entry for a verified blob.
func (c *Cache) record(src source, d Digest, fi os.FileInfo) (Entry, error) {
	e := Entry{Digest: d.String(), Source: src.String(), Name: src.Name, Arch: src.Arch, Fetched: time.Now().UTC()}
	if fi != nil {
		e.SourceSize, e.SourceModTime = fi.Size(), fi.ModTime()
	}
	if old, err := os.ReadFile(c.metaPath(d)); err == nil && src.Name == "" {
		// Keep a name given earlier when the same bytes come in unnamed.
		var prev Entry
		if json.Unmarshal(old, &prev) == nil {
			e.Name = prev.Name
		}
	}
	kind, err := sniffKind(c.blobPath(d))
	if err != nil {
		return Entry{}, err
	}
	e.Kind = kind
	if fi, err := os.Stat(c.blobPath(d)); err == nil {
		e.Size = fi.Size()
	}
	if err := c.writeEntry(e); err != nil {
		return Entry{}, err
	}
	return e, nil
}

var (
	zstdMagic  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}
)

// sniffKind tells the image kind from the first bytes, not the file name,
// since URLs and imported paths are often named loosely.
func sniffKind(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(f, head); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	switch {
	case bytes.Equal(head, zstdMagic):
		return KindVMDock, nil
	case bytes.Equal(head, qcow2Magic):
		return KindQCOW2, nil
	}
	return KindRaw, nil
}

// open turns a cache entry into an Image, unpacking a vmdock archive on
// first use.
func (c *Cache) open(e Entry) (*Image, error) {
	d, err := ParseDigest(e.Digest)
	if err != nil {
		return nil, err
	}
	blob := c.blobPath(d)
	switch e.Kind {
	case KindQCOW2, KindRaw:
		format := e.Kind
		return &Image{Dir: c.Dir, Disk: blob, DiskFormat: format, Arch: e.Arch, Digest: e.Digest, Kind: e.Kind}, nil
	case KindVMDock:
		dir := c.unpackDir(d)
		m, err := c.unpacked(blob, dir)
		if err != nil {
			return nil, err
		}
		return &Image{
			Dir: dir, Disk: filepath.Join(dir, "disk.raw"), DiskFormat: KindRaw,
			Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img"),
			Cmdline: m.Cmdline, Arch: m.Arch, Manifest: m, Digest: e.Digest, Kind: e.Kind,
		}, nil
	}
	return nil, fmt.Errorf("cached image %s: unknown kind %q", e.Digest, e.Kind)
}
