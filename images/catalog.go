package images

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Catalog names.
const (
	NameVMDock   = "vmdock"    // our own image, built locally by hack/image/build.sh
	NameDebian13 = "debian-13" // Debian trixie genericcloud, booted with EFI
)

// DefaultDebianBaseURL is where Debian publishes trixie cloud images and
// their SHA512SUMS.
const DefaultDebianBaseURL = "https://cloud.debian.org/images/cloud/trixie/latest/"

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
func CatalogNames() []string { return []string{NameVMDock, NameDebian13} }

// source is a resolved reference: where the bytes come from and, when
// known before fetching, their digest.
type source struct {
	Name   string // catalog or import name, "" for plain paths and URLs
	URL    string // http(s) URL, or "" for a local file
	Path   string // absolute local path, or "" for a URL
	Digest Digest // zero when unknown before fetching
	Arch   string
	// SumsURL is the checksum file that gives Digest; when it cannot be read
	// a cached copy of URL is used instead, so start works offline.
	SumsURL string
}

func (s source) String() string {
	if s.URL != "" {
		return s.URL
	}
	return s.Path
}

// vmdockImagePaths lists where a locally built vmdock image may be, in order.
func vmdockImagePaths(c *Cache, arch string) []string {
	name := "vmdock-" + arch + ".tar.zst"
	var out []string
	if d := os.Getenv("VMDOCK_IMAGE_DIR"); d != "" {
		out = append(out, filepath.Join(d, name))
	}
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
// holds hack/image (a vmdock checkout), else the working directory.
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
			return wd
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
	switch ref {
	case NameVMDock:
		paths := vmdockImagePaths(c, arch)
		for _, p := range paths {
			if _, err := os.Stat(p); err == nil {
				return source{Name: NameVMDock, Path: p, Arch: arch}, nil
			}
		}
		return source{}, fmt.Errorf("image %q for %s not built yet: none of %s exists (run `vmdock image build`, or set VMDOCK_IMAGE_DIR)",
			ref, arch, strings.Join(paths, ", "))
	case NameDebian13, "debian":
		base := opts.DebianBaseURL
		if base == "" {
			base = DefaultDebianBaseURL
		}
		if !strings.HasSuffix(base, "/") {
			base += "/"
		}
		s := source{
			Name:    NameDebian13,
			URL:     base + "debian-13-genericcloud-" + arch + ".qcow2",
			Arch:    arch,
			SumsURL: base + "SHA512SUMS",
		}
		d, err := fetchSum(ctx, opts, s.SumsURL, filepath.Base(s.URL))
		if err != nil {
			// Offline: a copy fetched earlier was verified then; keep using it.
			if e, ok := c.bySource(s.URL); ok {
				if cd, perr := ParseDigest(e.Digest); perr == nil {
					s.Digest = cd
					return s, nil
				}
			}
			return source{}, err
		}
		s.Digest = d
		return s, nil
	}
	switch {
	case strings.HasPrefix(ref, "http://"), strings.HasPrefix(ref, "https://"):
		return source{URL: ref, Arch: arch}, nil
	case strings.HasPrefix(ref, "file://"):
		return localSource(strings.TrimPrefix(ref, "file://"), arch, ref)
	}
	if strings.Contains(ref, "://") {
		return source{}, fmt.Errorf("image %q: scheme not supported (want a catalog name %s, a path, or a file://, http:// or https:// URL)",
			ref, strings.Join(CatalogNames(), ", "))
	}
	if strings.ContainsRune(ref, filepath.Separator) || strings.Contains(ref, ".") {
		return localSource(ref, arch, ref)
	}
	return source{}, fmt.Errorf("image %q: unknown name (want a catalog name %s, an imported name, a path, or a file://, http:// or https:// URL)",
		ref, strings.Join(CatalogNames(), ", "))
}

func localSource(p, arch, ref string) (source, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return source{}, fmt.Errorf("image %q: %w", ref, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return source{}, fmt.Errorf("image %q: no such file", ref)
		}
		return source{}, fmt.Errorf("image %q: %w", ref, err)
	}
	if !fi.Mode().IsRegular() {
		return source{}, fmt.Errorf("image %q: not a regular file", ref)
	}
	return source{Path: abs, Arch: arch}, nil
}

// fetchSum reads a SHA512SUMS file and returns the digest listed for file.
func fetchSum(ctx context.Context, opts Options, sumsURL, file string) (Digest, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sumsURL, nil)
	if err != nil {
		return Digest{}, fmt.Errorf("checksums %s: %w", sumsURL, err)
	}
	resp, err := opts.httpClient().Do(req)
	if err != nil {
		return Digest{}, fmt.Errorf("checksums %s: %w", sumsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Digest{}, fmt.Errorf("checksums %s: server answered %s", sumsURL, resp.Status)
	}
	d, err := parseSums(io.LimitReader(resp.Body, 1<<20), "sha512", file)
	if err != nil {
		return Digest{}, fmt.Errorf("checksums %s: %w", sumsURL, err)
	}
	return d, nil
}

// parseSums reads the `<hex>  <file>` lines written by sha512sum and friends.
func parseSums(r io.Reader, algo, file string) (Digest, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.TrimPrefix(f[1], "*") != file {
			continue
		}
		d := Digest{Algo: algo, Hex: strings.ToLower(f[0])}
		if err := d.validate(); err != nil {
			return Digest{}, fmt.Errorf("entry for %s: %w", file, err)
		}
		return d, nil
	}
	if err := sc.Err(); err != nil {
		return Digest{}, err
	}
	return Digest{}, fmt.Errorf("no entry for %s", file)
}

func (c *Cache) byName(name, arch string) (Entry, bool) {
	if name == "" {
		return Entry{}, false
	}
	all, err := c.Entries()
	if err != nil {
		return Entry{}, false
	}
	for _, e := range all {
		// Catalog names resolve through the catalog, so a rebuilt or
		// republished image is noticed; only imported names are looked up here.
		if e.Name == name && name != NameVMDock && name != NameDebian13 && (e.Arch == "" || e.Arch == arch) {
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
