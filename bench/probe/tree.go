package probe

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
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

// PhaseTime is the helper's answer for one phase.
type PhaseTime struct {
	Secs float64 `json:"secs"`
}

// treeLayout is the tree of n files from seed: the shared content and
// each file's size, so every phase (and every target) agrees on it.
func treeLayout(n int, seed uint64) (data []byte, sizes []int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	data = make([]byte, 20<<10)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	sizes = make([]int, n)
	for i := range sizes {
		sizes[i] = 100 + rng.IntN(20<<10-100+1)
	}
	return data, sizes
}

func treeFile(dir string, i, folders int) string {
	return filepath.Join(dir, fmt.Sprintf("d%05d", i%folders), fmt.Sprintf("f%06d.js", i))
}

// MakeTree writes the tree Tree measures: n files of 100 B to 20 KB in
// n/10 folders under dir, sizes from seed. It returns the bytes written.
func MakeTree(dir string, n int, seed uint64) (int64, error) {
	folders := max(n/10, 1)
	data, sizes := treeLayout(n, seed)
	for f := 0; f < folders; f++ {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("d%05d", f)), 0o755); err != nil {
			return 0, fmt.Errorf("tree create: %w", err)
		}
	}
	var total int64
	for i, size := range sizes {
		if err := os.WriteFile(treeFile(dir, i, folders), data[:size], 0o644); err != nil {
			return total, fmt.Errorf("tree create: %w", err)
		}
		total += int64(size)
	}
	return total, nil
}

// The phases of Tree, in order.
const (
	PhaseCreate = "create"
	PhaseWalk   = "walk"
	PhaseRead   = "read"
	PhaseDelete = "delete"
)

// TreePhases lists the phases in the order they must run.
var TreePhases = []string{PhaseCreate, PhaseWalk, PhaseRead, PhaseDelete}

// Tree mimics a package-manager install: n files of 100 B to 20 KB in
// n/10 folders under dir (which must not exist), then a stat walk, a read
// of every file and a recursive delete. The seed makes sizes repeatable
// so native and shared folders get the same tree.
func Tree(dir string, n int, seed uint64) (TreeTimes, error) {
	t := TreeTimes{Files: n}
	for _, phase := range TreePhases {
		secs, err := TreePhase(dir, n, seed, phase)
		if err != nil {
			return t, err
		}
		switch phase {
		case PhaseCreate:
			t.Create = secs
		case PhaseWalk:
			t.Walk = secs
		case PhaseRead:
			t.Read = secs
		case PhaseDelete:
			t.Delete = secs
		}
	}
	_, sizes := treeLayout(n, seed)
	for _, s := range sizes {
		t.Bytes += int64(s)
	}
	return t, nil
}

// TreePhase runs one phase of Tree and returns its seconds. Each phase
// checks what the earlier ones left: the bench runs them one by one so
// that a sync mount can catch up in between (and that time is its own row).
func TreePhase(dir string, n int, seed uint64, phase string) (float64, error) {
	if n < 1 {
		return 0, fmt.Errorf("tree: file count %d: accepted: 1 or more", n)
	}
	folders := max(n/10, 1)
	start := time.Now()
	switch phase {
	case PhaseCreate:
		if _, err := os.Lstat(dir); err == nil {
			return 0, fmt.Errorf("tree: %s already exists; it must be a fresh path", dir)
		}
		if _, err := MakeTree(dir, n, seed); err != nil {
			return 0, err
		}
	case PhaseWalk:
		seen := 0
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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
			return 0, fmt.Errorf("tree walk: %w", err)
		}
		if seen != n {
			return 0, fmt.Errorf("tree walk: found %d files, wrote %d", seen, n)
		}
	case PhaseRead:
		_, sizes := treeLayout(n, seed)
		buf := make([]byte, 32<<10)
		for i, size := range sizes {
			k, err := readAll(treeFile(dir, i, folders), buf)
			if err != nil {
				return 0, fmt.Errorf("tree read: %w", err)
			}
			if k != int64(size) {
				return 0, fmt.Errorf("tree read: %s has %d bytes, wrote %d", treeFile(dir, i, folders), k, size)
			}
		}
	case PhaseDelete:
		if err := os.RemoveAll(dir); err != nil {
			return 0, fmt.Errorf("tree delete: %w", err)
		}
	default:
		return 0, fmt.Errorf("tree phase %q: accepted: %s", phase, strings.Join(TreePhases, ", "))
	}
	return time.Since(start).Seconds(), nil
}

func readAll(p string, buf []byte) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.CopyBuffer(io.Discard, f, buf)
}
