package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// Image kinds, as stored in Entry.Kind.
const (
	KindVMDock = "vmdock" // .tar.zst with disk.raw, vmlinuz, initrd.img, manifest.json
	KindQCOW2  = "qcow2"  // bare disk, booted with EFI
	KindRaw    = "raw"    // bare disk, booted with EFI
)

// Entry is one cached file and what is known about where it came from.
// It is stored as blobs/<algo>-<hex>.json beside the blob.
type Entry struct {
	Digest  string    `json:"digest"`         // sha256:<hex> or sha512:<hex>
	Name    string    `json:"name,omitempty"` // catalog or import name
	Source  string    `json:"source"`         // URL or absolute path it was fetched from
	Arch    string    `json:"arch,omitempty"`
	Kind    string    `json:"kind"`
	Size    int64     `json:"size"`
	Fetched time.Time `json:"fetched"`
	// SourceSize and SourceModTime let a local file be recognised again
	// without hashing it first.
	SourceSize    int64     `json:"sourceSize,omitempty"`
	SourceModTime time.Time `json:"sourceModTime,omitempty"`
}

// Cache is the image cache folder.
//
//	blobs/<algo>-<hex>        fetched file, named by its digest
//	blobs/<algo>-<hex>.json   its Entry
//	unpacked/<algo>-<hex>/    a vmdock image's files, unpacked and verified
//	built/                    where `vmdock image build` leaves archives
//	tmp/                      downloads in progress (same file system, so rename is atomic)
//	manifests/                the release manifest last fetched, per base URL (offline starts)
//	defaults/<arch>.json      the imported vmdock image a default start uses
type Cache struct{ Dir string }

// DefaultCacheDir is $VMDOCK_CACHE, else the platform's folder for it:
// $XDG_CACHE_HOME/vmdock on Linux; on macOS ~/Library/Application
// Support/vmdock, since macOS may purge ~/Library/Caches, and a 1.3 GB
// image gone before an offline start is a start that fails. A cache left
// in the old place is moved to the new one.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("VMDOCK_CACHE"); d != "" {
		return d, nil
	}
	dir, legacy, err := platformCacheDirs()
	if err != nil {
		return "", fmt.Errorf("image cache folder: %w (set VMDOCK_CACHE)", err)
	}
	return adoptLegacyCache(dir, legacy), nil
}

// adoptLegacyCache moves a cache from legacy to dir when only legacy
// exists, and keeps using legacy when the move fails, so images already
// there are found either way.
func adoptLegacyCache(dir, legacy string) string {
	if legacy == "" || legacy == dir {
		return dir
	}
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	if fi, err := os.Stat(legacy); err != nil || !fi.IsDir() {
		return dir
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err == nil {
		if err := os.Rename(legacy, dir); err == nil {
			slog.Info("moved the image cache", "from", legacy, "to", dir)
			return dir
		}
	}
	return legacy
}

// OpenCache returns the cache at dir (DefaultCacheDir when empty), creating it.
func OpenCache(dir string) (*Cache, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	for _, sub := range []string{"blobs", "unpacked", "built", "tmp", "manifests", "defaults"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("create image cache %s: %w", dir, err)
		}
	}
	return &Cache{Dir: dir}, nil
}

func (c *Cache) blobPath(d Digest) string { return filepath.Join(c.Dir, "blobs", d.key()) }
func (c *Cache) metaPath(d Digest) string { return c.blobPath(d) + ".json" }
func (c *Cache) unpackDir(d Digest) string {
	return filepath.Join(c.Dir, "unpacked", d.key())
}

// BuiltDir is where image builds leave vmdock-<arch>.tar.zst.
func (c *Cache) BuiltDir() string { return filepath.Join(c.Dir, "built") }

func (c *Cache) tempFile(pattern string) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Join(c.Dir, "tmp"), pattern)
	if err != nil {
		return nil, fmt.Errorf("create temp file in image cache: %w", err)
	}
	return f, nil
}

func (c *Cache) writeEntry(e Entry) error {
	d, err := ParseDigest(e.Digest)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(c.metaPath(d), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write cache entry: %w", err)
	}
	return nil
}

// Entries lists cached files, newest first. Blobs whose metadata is missing
// or unreadable are listed with what can be seen from the file name.
func (c *Cache) Entries() ([]Entry, error) {
	dir := filepath.Join(c.Dir, "blobs")
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list image cache: %w", err)
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		if strings.Contains(name, ".") || !de.Type().IsRegular() {
			continue
		}
		algo, hexPart, _ := strings.Cut(name, "-")
		d := Digest{Algo: algo, Hex: hexPart}
		if d.validate() != nil {
			continue
		}
		e := Entry{Digest: d.String()}
		if b, err := os.ReadFile(c.metaPath(d)); err == nil {
			if err := json.Unmarshal(b, &e); err != nil {
				slog.Warn("image cache: unreadable entry", "file", c.metaPath(d), "err", err)
			}
			e.Digest = d.String()
		}
		if fi, err := de.Info(); err == nil {
			e.Size = fi.Size()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Fetched.After(out[j].Fetched) })
	return out, nil
}

// Remove deletes the blob, its metadata and its unpacked files.
func (c *Cache) Remove(digest string) error {
	d, err := ParseDigest(digest)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range []string{c.blobPath(d), c.metaPath(d)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(c.unpackDir(d)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove cached image %s: %w", d, err)
	}
	return nil
}

// Find returns the entries matching a name, a source, a full digest or a
// digest prefix of at least 8 hex digits (with or without "sha256:").
func (c *Cache) Find(q string) ([]Entry, error) {
	all, err := c.Entries()
	if err != nil {
		return nil, err
	}
	q = strings.TrimSpace(q)
	if q == "" {
		return nil, nil
	}
	var out []Entry
	for _, e := range all {
		if e.matches(q) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (e Entry) matches(q string) bool {
	if q == e.Name || q == e.Source || q == e.Digest {
		return true
	}
	_, hexPart, _ := strings.Cut(e.Digest, ":")
	qHex := q
	if a, h, ok := strings.Cut(q, ":"); ok {
		if !strings.HasPrefix(e.Digest, a+":") {
			return false
		}
		qHex = h
	}
	return len(qHex) >= 8 && strings.HasPrefix(hexPart, strings.ToLower(qHex))
}
