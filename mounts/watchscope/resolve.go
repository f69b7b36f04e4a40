package watchscope

import "path/filepath"

// Resolve is p with symlinks resolved as far as p exists: a folder made
// later (the image cache before the first download) still resolves
// through its existing parents, so it is skipped where it will be.
func Resolve(p string) string {
	rest := ""
	for q := filepath.Clean(p); ; {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(q)
		if parent == q {
			return filepath.Clean(p)
		}
		rest = filepath.Join(filepath.Base(q), rest)
		q = parent
	}
}
