package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vmdock/vmdock/atomicfile"
)

// checkImportArch accepts an import's arch: "" takes the image's (a vmdock
// manifest's, else the host's).
func checkImportArch(arch string) error {
	if arch == "" {
		return nil
	}
	return checkArch(arch)
}

// orHostArch is arch, or the host's when it is "": what a catalog name
// resolves for when an import names no arch.
func orHostArch(arch string) string {
	if arch == "" {
		return runtime.GOARCH
	}
	return arch
}

// fetchImport fetches src for Import and settles the entry's arch: a
// vmdock image's is its manifest's, and an arch given that conflicts is
// refused; a disk's is the one given, else the host's. Bytes that were
// cached already are checked as fetched ones are (an older vmdock took
// anything), and a refusal leaves the cache as it found it.
func (c *Cache) fetchImport(ctx context.Context, opts Options, src source, arch string) (Entry, error) {
	before, err := c.snapshot()
	if err != nil {
		return Entry{}, err
	}
	e, err := c.fetch(ctx, opts, src)
	if err != nil {
		return Entry{}, err
	}
	imgArch, err := c.checkImported(e, arch)
	if err != nil {
		if uerr := before.restore(c, e.Digest); uerr != nil {
			slog.Warn("undo a refused import", "digest", e.Digest, "err", uerr)
		}
		return Entry{}, fmt.Errorf("import %s: %w", src, err)
	}
	if e.Arch != imgArch {
		e.Arch = imgArch
		if err := c.writeEntry(e); err != nil {
			return Entry{}, err
		}
	}
	return e, nil
}

// checkImported checks the cached entry e as a fetched file is checked and
// returns the arch it is for.
func (c *Cache) checkImported(e Entry, arch string) (string, error) {
	d, err := ParseDigest(e.Digest)
	if err != nil {
		return "", err
	}
	blob := c.blobPath(d)
	switch e.Kind {
	case KindVMDock:
		// Unpacked already by the fetch's check; an image cached before
		// that check is unpacked (and so checked) here, once.
		m, err := c.unpacked(blob, c.unpackDir(d))
		if err != nil {
			return "", err
		}
		if arch != "" && m.Arch != arch {
			return "", fmt.Errorf("the image is for %s (its manifest says so), not %s; accepted: --arch %s, or no --arch to take the image's", m.Arch, arch, m.Arch)
		}
		return m.Arch, nil
	case KindQCOW2:
		err = checkQCOW2File(blob)
	case KindRaw:
		err = checkRawFile(blob)
	default:
		err = fmt.Errorf("unknown kind %q", e.Kind)
	}
	return orHostArch(arch), err
}

// cacheSnapshot is what an import may change: which blobs and unpacked
// folders exist, and each entry's bytes.
type cacheSnapshot struct {
	blobs    map[string]bool   // by Digest.key
	entries  map[string][]byte // by Digest.key
	unpacked map[string]bool   // by Digest.key
}

func (c *Cache) snapshot() (cacheSnapshot, error) {
	s := cacheSnapshot{blobs: map[string]bool{}, entries: map[string][]byte{}, unpacked: map[string]bool{}}
	des, err := os.ReadDir(filepath.Join(c.Dir, "blobs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("list image cache: %w", err)
	}
	for _, de := range des {
		key, isEntry := strings.CutSuffix(de.Name(), ".json")
		if !isEntry {
			s.blobs[key] = true
			continue
		}
		b, err := os.ReadFile(filepath.Join(c.Dir, "blobs", de.Name()))
		if err != nil {
			return s, fmt.Errorf("read image cache: %w", err)
		}
		s.entries[key] = b
	}
	des, err = os.ReadDir(filepath.Join(c.Dir, "unpacked"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("list image cache: %w", err)
	}
	for _, de := range des {
		s.unpacked[de.Name()] = true
	}
	return s, nil
}

// restore puts the files of digest back as s saw them: an image new since
// then is removed whole; one cached before gets its entry back and loses
// only an unpacked folder made since.
func (s cacheSnapshot) restore(c *Cache, digest string) error {
	d, err := ParseDigest(digest)
	if err != nil {
		return err
	}
	key := d.key()
	if !s.blobs[key] {
		return c.Remove(digest)
	}
	var errs []error
	if old, ok := s.entries[key]; ok {
		errs = append(errs, atomicfile.WriteFile(c.metaPath(d), old, 0o644))
	} else if err := os.Remove(c.metaPath(d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if !s.unpacked[key] {
		errs = append(errs, os.RemoveAll(c.unpackDir(d)))
	}
	return errors.Join(errs...)
}
