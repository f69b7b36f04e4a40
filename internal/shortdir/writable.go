package shortdir

import (
	"io/fs"
	"os"
	"path/filepath"
)

// makeWritable gives the owner write and search permission on every folder
// under dir.
func makeWritable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
}
