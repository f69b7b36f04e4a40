package images

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vmdock/vmdock/internal/atomicfile"
)

// importedDefault is the vmdock image `vmdock image import` last made the
// default for arch, while it is still cached.
func (c *Cache) importedDefault(arch string) (Entry, bool) {
	b, err := os.ReadFile(c.defaultPath(arch))
	if err != nil {
		return Entry{}, false
	}
	var mark struct {
		Digest string    `json:"digest"`
		Set    time.Time `json:"set"`
	}
	if json.Unmarshal(b, &mark) != nil {
		return Entry{}, false
	}
	d, err := ParseDigest(mark.Digest)
	if err != nil {
		return Entry{}, false
	}
	eb, err := os.ReadFile(c.metaPath(d))
	if err != nil {
		return Entry{}, false
	}
	var e Entry
	if json.Unmarshal(eb, &e) != nil || e.Kind != KindVMDock {
		return Entry{}, false
	}
	if _, err := os.Stat(c.blobPath(d)); err != nil {
		return Entry{}, false
	}
	e.Digest = d.String()
	e.Fetched = mark.Set // newer than a local build only if imported after it
	return e, true
}

// setDefault makes a cached vmdock image what a start without --image
// uses for arch.
func (c *Cache) setDefault(arch, digest string) error {
	b, err := json.Marshal(map[string]any{"digest": digest, "set": time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.defaultPath(arch)), 0o755); err != nil {
		return fmt.Errorf("record default image: %w", err)
	}
	if err := atomicfile.WriteFile(c.defaultPath(arch), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("record default image: %w", err)
	}
	return nil
}

func (c *Cache) defaultPath(arch string) string {
	return filepath.Join(c.Dir, "defaults", arch+".json")
}
