package images

import (
	"context"
	"fmt"
	"runtime"
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

// checkManifestArch refuses a vmdock image whose manifest names another
// arch than the one given; "" takes the image's.
func checkManifestArch(m *Manifest, arch string) error {
	if arch != "" && m.Arch != arch {
		return fmt.Errorf("the image is for %s (its manifest says so), not %s; accepted: --arch %s, or no --arch to take the image's", m.Arch, arch, m.Arch)
	}
	return nil
}

// fetchImport fetches src for Import and records its entry only once its
// bytes passed the check, so a refused import is never listed and leaves
// the cache as it found it. Fetched bytes are refused before they enter
// blobs/. Bytes that were there already are checked here, as fetched ones
// are (an older vmdock took anything), and a refusal leaves them and their
// entry alone: what other entries or instances use is not this import's
// to delete.
func (c *Cache) fetchImport(ctx context.Context, opts Options, src source, arch string) (Entry, error) {
	d, fi, err := c.fetchBlob(ctx, opts, src, arch)
	if err != nil {
		return Entry{}, err
	}
	if src.Arch, err = c.checkCached(d, arch); err != nil {
		return Entry{}, fmt.Errorf("import %s: %w", src, err)
	}
	return c.record(src, d, fi)
}

// checkCached checks the cached blob d as checkFetchedDisk checks a fetched
// file and returns the arch its entry is for: a vmdock image's manifest's,
// else arch, else the host's. For bytes just fetched it is cheap, as their
// unpack is in place. It writes nothing but d's unpack folder, and only
// once the check passed.
func (c *Cache) checkCached(d Digest, arch string) (string, error) {
	if m, err := checkUnpacked(c.unpackDir(d)); err == nil {
		// Unpacked, and so checked, by an earlier fetch or start.
		if err := checkManifestArch(m, arch); err != nil {
			return "", err
		}
		return m.Arch, nil
	}
	imgArch, settle, err := c.checkFetchedDisk(c.blobPath(d), d, arch)
	if err != nil {
		return "", err
	}
	if err := settle(nil); err != nil { // the blob is in already
		return "", err
	}
	if imgArch == "" {
		imgArch = orHostArch(arch)
	}
	return imgArch, nil
}
