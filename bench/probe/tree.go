package probe

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// TreeTimes are the phases of the small-file benchmark, in seconds.
type TreeTimes struct {
	Files  int     `json:"files"`
	Bytes  int64   `json:"bytes"`
	Create float64 `json:"create"`
	Walk   float64 `json:"walk"`
	Read   float64 `json:"read"`
	Delete float64 `json:"delete"`
}

// MakeTree writes the tree Tree measures: n files of 100 B to 20 KB in
// n/10 folders under dir, sizes from seed. It returns the bytes written.
func MakeTree(dir string, n int, seed uint64) (int64, error) {
	folders := max(n/10, 1)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	data := make([]byte, 20<<10)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	for f := 0; f < folders; f++ {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("d%05d", f)), 0o755); err != nil {
			return 0, fmt.Errorf("tree create: %w", err)
		}
	}
	var total int64
	for i := 0; i < n; i++ {
		size := 100 + rng.IntN(20<<10-100+1)
		p := filepath.Join(dir, fmt.Sprintf("d%05d", i%folders), fmt.Sprintf("f%06d.js", i))
		if err := os.WriteFile(p, data[:size], 0o644); err != nil {
			return total, fmt.Errorf("tree create: %w", err)
		}
		total += int64(size)
	}
	return total, nil
}

// Tree mimics a package-manager install: n files of 100 B to 20 KB in
// n/10 folders under dir (which must not exist), then a stat walk, a read
// of every file and a recursive delete. The seed makes sizes repeatable
// so native and shared folders get the same tree.
func Tree(dir string, n int, seed uint64) (TreeTimes, error) {
	t := TreeTimes{Files: n}
	if n < 1 {
		return t, fmt.Errorf("tree: file count %d: accepted: 1 or more", n)
	}
	if _, err := os.Lstat(dir); err == nil {
		return t, fmt.Errorf("tree: %s already exists; it must be a fresh path", dir)
	}
	start := time.Now()
	b, err := MakeTree(dir, n, seed)
	if err != nil {
		return t, err
	}
	t.Bytes = b
	t.Create = time.Since(start).Seconds()

	start = time.Now()
	seen := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// DirEntry alone may come from getdents without a stat; Info
		// forces one per entry, like `ls -lR` or a bundler's resolver.
		if _, err := d.Info(); err != nil {
			return err
		}
		if !d.IsDir() {
			seen++
		}
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("tree walk: %w", err)
	}
	if seen != n {
		return t, fmt.Errorf("tree walk: found %d files, wrote %d", seen, n)
	}
	t.Walk = time.Since(start).Seconds()

	start = time.Now()
	folders := max(n/10, 1)
	buf := make([]byte, 32<<10)
	var read int64
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%05d", i%folders), fmt.Sprintf("f%06d.js", i))
		k, err := readAll(p, buf)
		if err != nil {
			return t, fmt.Errorf("tree read: %w", err)
		}
		read += k
	}
	if read != t.Bytes {
		return t, fmt.Errorf("tree read: got %d bytes, wrote %d", read, t.Bytes)
	}
	t.Read = time.Since(start).Seconds()

	start = time.Now()
	if err := os.RemoveAll(dir); err != nil {
		return t, fmt.Errorf("tree delete: %w", err)
	}
	t.Delete = time.Since(start).Seconds()
	return t, nil
}

func readAll(p string, buf []byte) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.CopyBuffer(io.Discard, f, buf)
}
