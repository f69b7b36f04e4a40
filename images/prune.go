package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Used is what the instances under a vmdock home still need from the cache.
type Used struct {
	Digests map[string]bool // from <instance>/image.digest
	Refs    map[string]bool // image references of instances not started yet
	// Defaults are the digests a start without --image would use (see
	// ResolveDefault): pruning one would make the next start fetch it again.
	Defaults map[string]bool
}

func (u Used) keeps(e Entry) bool {
	return u.Digests[e.Digest] || u.Defaults[e.Digest] || (e.Name != "" && u.Refs[e.Name]) || u.Refs[e.Source]
}

// AddDefaults marks the images a default start would use for each arch,
// as far as this machine knows without the network.
func (u *Used) AddDefaults(ctx context.Context, opts Options) {
	if u.Defaults == nil {
		u.Defaults = map[string]bool{}
	}
	opts.Offline = true
	for _, arch := range Arches {
		if d, err := ResolveDefault(ctx, arch, opts); err == nil && d.Digest != "" {
			u.Defaults[d.Digest] = true
		}
	}
}

// UsedBy scans home (each <home>/<profile>/ with a vmdock.yaml) for the
// images its instances use. An instance that records the digest of its
// image keeps exactly that; one that never started keeps its configured
// reference (the vmdock image when it names none).
func UsedBy(home string) (Used, error) {
	u := Used{Digests: map[string]bool{}, Refs: map[string]bool{}}
	des, err := os.ReadDir(home)
	if errors.Is(err, fs.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return u, fmt.Errorf("list instances in %s: %w", home, err)
	}
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		dir := filepath.Join(home, de.Name())
		cfg, err := os.ReadFile(filepath.Join(dir, "vmdock.yaml"))
		if err != nil {
			continue // not an instance
		}
		if b, err := os.ReadFile(filepath.Join(dir, DigestFileName)); err == nil {
			if d := strings.TrimSpace(string(b)); d != "" {
				u.Digests[d] = true
				continue
			}
		}
		var c struct {
			Image string `yaml:"image"`
		}
		if err := yaml.Unmarshal(cfg, &c); err != nil {
			return u, fmt.Errorf("read %s: %w", filepath.Join(dir, "vmdock.yaml"), err)
		}
		ref := c.Image
		if ref == "" {
			ref = NameVMDock
		}
		if abs, err := filepath.Abs(ref); err == nil && !strings.Contains(ref, "://") && strings.ContainsRune(ref, filepath.Separator) {
			ref = abs // entries record local sources as absolute paths
		}
		u.Refs[ref] = true
	}
	return u, nil
}

// partialKeep is how long prune leaves a partial download to be resumed.
const partialKeep = 7 * 24 * time.Hour

// Prune removes cached images that used does not keep, plus leftovers of
// interrupted downloads, and returns the removed entries.
func (c *Cache) Prune(used Used) ([]Entry, error) {
	unlock, err := c.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	all, err := c.Entries()
	if err != nil {
		return nil, err
	}
	var removed []Entry
	for _, e := range all {
		if used.keeps(e) {
			continue
		}
		if err := c.Remove(e.Digest); err != nil {
			return removed, err
		}
		removed = append(removed, e)
	}
	// Temp files older than a day are not in progress any more; a partial
	// download is resumed by the next start, so it stays a week.
	tmp := filepath.Join(c.Dir, "tmp")
	if des, err := os.ReadDir(tmp); err == nil {
		for _, de := range des {
			keep := 24 * time.Hour
			if strings.HasPrefix(de.Name(), PartialPrefix) {
				keep = partialKeep
			}
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > keep {
				os.RemoveAll(filepath.Join(tmp, de.Name()))
			}
		}
	}
	return removed, nil
}
