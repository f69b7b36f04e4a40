package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/internal/fsutil"
)

// NameVMDock is the catalog name of our own image: a local build, the
// last imported vmdock image, or the published one for the arch.
const NameVMDock = "vmdock"

// Arches lists the accepted guest architectures.
var Arches = []string{"amd64", "arm64"}

func checkArch(arch string) error {
	for _, a := range Arches {
		if arch == a {
			return nil
		}
	}
	return fmt.Errorf("architecture %q not supported (amd64, arm64)", arch)
}

// CatalogNames lists the names a reference may use besides paths and URLs.
func CatalogNames() []string { return []string{NameVMDock} }

// source is a resolved reference: where the bytes come from and, when
// known before fetching, their digest and size.
type source struct {
	Name   string // catalog or import name, "" for plain paths and URLs
	URL    string // http(s) URL, or "" for a local file
	Path   string // absolute local path, or "" for a URL
	Digest Digest // zero when unknown before fetching
	Size   int64  // 0 when unknown before fetching
	Arch   string
	Origin string // for the vmdock name: SourceLocalBuild, SourceImport or SourceDownload
}

func (s source) String() string {
	if s.URL != "" {
		return s.URL
	}
	return s.Path
}

// Where a default start's image comes from.
const (
	SourceLocalBuild = "local-build" // make image, vmdock image build, VMDOCK_IMAGE_DIR
	SourceImport     = "import"      // the last `vmdock image import` of a vmdock image
	SourceDownload   = "download"    // the release manifest at the image base URL
)

// DefaultImage is what a start without --image would use for an arch.
type DefaultImage struct {
	Arch    string        `json:"arch"`
	Source  string        `json:"source"`         // SourceLocalBuild, SourceImport or SourceDownload
	Path    string        `json:"path,omitempty"` // a local build, or the cached blob of an import
	URL     string        `json:"url,omitempty"`  // a download's file URL
	Digest  string        `json:"digest,omitempty"`
	Cached  bool          `json:"cached"` // its bytes are in the cache: start needs no network
	Release *ReleaseImage `json:"release,omitempty"`
}

// ResolveDefault says which image a start without --image would use for
// arch, without fetching it. With opts.Offline it reads only what is on
// this machine (a release manifest fetched earlier included).
func ResolveDefault(ctx context.Context, arch string, opts Options) (DefaultImage, error) {
	if err := checkArch(arch); err != nil {
		return DefaultImage{}, err
	}
	c, err := OpenCache(opts.CacheDir)
	if err != nil {
		return DefaultImage{}, err
	}
	src, rel, err := c.resolveVMDock(ctx, opts, arch)
	if err != nil {
		return DefaultImage{}, err
	}
	d := DefaultImage{Arch: arch, Source: src.Origin, Path: src.Path, URL: src.URL, Release: rel}
	want := src.Digest
	if want.IsZero() && src.Path != "" {
		want = c.knownDigestOf(src.Path)
	}
	if !want.IsZero() {
		d.Digest = want.String()
		_, err := os.Stat(c.blobPath(want))
		d.Cached = err == nil
	}
	return d, nil
}

// knownDigestOf is the digest recorded for a local file imported before,
// while its size and modification time are unchanged; zero otherwise.
func (c *Cache) knownDigestOf(path string) Digest {
	e, ok := c.bySource(path)
	if !ok {
		return Digest{}
	}
	fi, err := os.Stat(path)
	if err != nil || e.SourceSize != fi.Size() || !e.SourceModTime.Equal(fi.ModTime()) {
		return Digest{}
	}
	d, _ := ParseDigest(e.Digest)
	return d
}

// resolveVMDock picks the vmdock image for arch: VMDOCK_IMAGE_DIR when it
// holds one; else the newer of the last imported vmdock image and a local
// build (so neither a stale import nor a stale build hides a fresh one);
// else the published image named by the release manifest.
func (c *Cache) resolveVMDock(ctx context.Context, opts Options, arch string) (source, *ReleaseImage, error) {
	name := "vmdock-" + arch + ".tar.zst"
	if d := os.Getenv("VMDOCK_IMAGE_DIR"); d != "" {
		if p := filepath.Join(d, name); fsutil.IsFile(p) {
			return source{Name: NameVMDock, Path: p, Arch: arch, Origin: SourceLocalBuild}, nil, nil
		}
	}
	var build source
	var buildTime int64
	for _, p := range localBuildPaths(c, arch) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			build = source{Name: NameVMDock, Path: p, Arch: arch, Origin: SourceLocalBuild}
			buildTime = fi.ModTime().UnixNano()
			break
		}
	}
	if imp, ok := c.importedDefault(arch); ok {
		if build.Path == "" || imp.Fetched.UnixNano() >= buildTime {
			d, _ := ParseDigest(imp.Digest)
			return source{Name: imp.Name, Path: c.blobPath(d), Digest: d, Arch: arch, Origin: SourceImport}, nil, nil
		}
	}
	if build.Path != "" {
		return build, nil, nil
	}
	base := effectiveBaseURL(opts.BaseURL)
	if base == "" {
		return source{}, nil, fmt.Errorf("image %q for %s: no local build, no imported vmdock image, and no image download URL in this build; %s",
			NameVMDock, arch, noImageAdvice(arch))
	}
	m, where, err := c.releaseManifest(ctx, opts, base)
	if err != nil {
		return source{}, nil, err
	}
	rel, err := m.ForArch(arch, where)
	if err != nil {
		return source{}, nil, err
	}
	d, _ := ParseDigest("sha256:" + rel.SHA256)
	return source{Name: NameVMDock, URL: base + rel.File, Digest: d, Size: rel.Size, Arch: arch, Origin: SourceDownload}, &rel, nil
}

// makeImageTarget is the make target that builds arch's image in a
// checkout: `make image` is amd64 whatever the host (arm64 builds through
// qemu-user there), so the target follows the guest, not the host.
func makeImageTarget(arch string) string {
	if arch == "arm64" {
		return "make image-arm64"
	}
	return "make image"
}

// archiveFile is the file a build or release holds arch's image in.
func archiveFile(arch string) string { return "vmdock-" + arch + ".tar.zst" }

// localBuildPaths lists where a locally built vmdock image may be, in order.
func localBuildPaths(c *Cache, arch string) []string {
	name := "vmdock-" + arch + ".tar.zst"
	var out []string
	for _, root := range []string{repoRoot(), exeCheckout()} {
		if root != "" {
			out = append(out, filepath.Join(root, "hack", "image", "out", name))
		}
	}
	return append(out, filepath.Join(c.BuiltDir(), name))
}

// exeCheckout is the checkout a source-built vmdock runs from (bin/vmdock
// next to hack/image): the detached host agent runs in the instance folder,
// so the working directory alone would not find `make image`'s output.
func exeCheckout() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return ""
	}
	root := filepath.Dir(filepath.Dir(exe))
	if fi, err := os.Stat(filepath.Join(root, "hack", "image")); err == nil && fi.IsDir() {
		return root
	}
	return ""
}

// repoRoot is the nearest folder at or above the working directory that
// holds hack/image (a vmdock checkout), else "".
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for d := wd; ; {
		if fi, err := os.Stat(filepath.Join(d, "hack", "image")); err == nil && fi.IsDir() {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// resolve turns a reference into a source. Cached names come first, so an
// imported image can shadow a catalog name.
func resolve(ctx context.Context, c *Cache, opts Options, ref, arch string) (source, error) {
	if e, ok := c.byName(ref, arch); ok {
		d, _ := ParseDigest(e.Digest)
		s := source{Name: e.Name, Digest: d, Arch: e.Arch}
		if strings.HasPrefix(e.Source, "http://") || strings.HasPrefix(e.Source, "https://") {
			s.URL = e.Source
		} else {
			s.Path = e.Source
		}
		return s, nil
	}
	if ref == NameVMDock {
		s, _, err := c.resolveVMDock(ctx, opts, arch)
		return s, err
	}
	if err := CheckRef(ref); err != nil {
		return source{}, err
	}
	switch {
	case strings.HasPrefix(ref, "http://"), strings.HasPrefix(ref, "https://"):
		return source{URL: ref, Arch: arch}, nil
	case strings.HasPrefix(ref, "file://"):
		return localSource(strings.TrimPrefix(ref, "file://"), arch, ref)
	}
	return localSource(ref, arch, ref)
}

// RefAccepted names what an image reference may be, for refusals.
const RefAccepted = "the catalog name " + NameVMDock + ", an imported name, a path, or a file://, http:// or https:// URL"

// SchemeSupported reports whether ref is a path or name, or a URL with a
// scheme resolve fetches: an unknown scheme never works, so config
// validation refuses it before anything starts.
func SchemeSupported(ref string) bool {
	if !strings.Contains(ref, "://") {
		return true
	}
	for _, scheme := range []string{"file://", "http://", "https://"} {
		if strings.HasPrefix(ref, scheme) {
			return true
		}
	}
	return false
}

// AbsRef is ref with a relative file path made absolute: a reference is
// saved in the instance's config and resolved by the host agent, whose
// folder is not the user's. A path is a reference with a path separator,
// or a file that exists here; catalog and imported names, URLs and
// absolute paths are returned as they are.
func AbsRef(ref string) (string, error) {
	if ref == "" || ref == NameVMDock || strings.Contains(ref, "://") || filepath.IsAbs(ref) {
		return ref, nil
	}
	if !strings.ContainsRune(ref, filepath.Separator) {
		if _, err := os.Stat(ref); err != nil {
			return ref, nil
		}
	}
	abs, err := filepath.Abs(ref)
	if err != nil {
		return ref, fmt.Errorf("image %q: %w", ref, err)
	}
	return abs, nil
}

// CheckRef refuses a reference whose URL scheme resolve cannot fetch.
func CheckRef(ref string) error {
	if !SchemeSupported(ref) {
		return fmt.Errorf("image %q: scheme not supported (accepted: %s)", ref, RefAccepted)
	}
	return nil
}

func localSource(p, arch, ref string) (source, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return source{}, fmt.Errorf("image %q: %w", ref, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if !strings.ContainsRune(p, filepath.Separator) && !strings.Contains(p, ".") {
				return source{}, fmt.Errorf("image %q: unknown name (accepted: %s)", ref, RefAccepted)
			}
			return source{}, fmt.Errorf("image %q: no such file", ref)
		}
		return source{}, fmt.Errorf("image %q: %w", ref, err)
	}
	if !fi.Mode().IsRegular() {
		return source{}, fmt.Errorf("image %q: not a regular file", ref)
	}
	return source{Path: abs, Arch: arch}, nil
}

func (c *Cache) byName(name, arch string) (Entry, bool) {
	if name == "" || name == NameVMDock {
		// The catalog name resolves through resolveVMDock, so a rebuilt,
		// imported or republished image is noticed.
		return Entry{}, false
	}
	all, err := c.Entries()
	if err != nil {
		return Entry{}, false
	}
	for _, e := range all {
		if e.Name == name && (e.Arch == "" || e.Arch == arch) {
			return e, true
		}
	}
	return Entry{}, false
}

func (c *Cache) bySource(src string) (Entry, bool) {
	all, err := c.Entries()
	if err != nil {
		return Entry{}, false
	}
	for _, e := range all {
		if e.Source == src {
			return e, true
		}
	}
	return Entry{}, false
}
