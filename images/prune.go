package images

import (
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
}

func (u Used) keeps(e Entry) bool {
	return u.Digests[e.Digest] || (e.Name != "" && u.Refs[e.Name]) || u.Refs[e.Source]
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
	// Downloads older than a day are not in progress any more.
	tmp := filepath.Join(c.Dir, "tmp")
	if des, err := os.ReadDir(tmp); err == nil {
		for _, de := range des {
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
				os.RemoveAll(filepath.Join(tmp, de.Name()))
			}
		}
	}
	return removed, nil
}
