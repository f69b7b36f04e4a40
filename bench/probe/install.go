package probe

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// InstallTimes are the phases of the seeds' workload: a package manager
// unpacks a dependency tree, then the app reads every file of it (composer
// install, then serving PHP; npm install, then a bundler).
type InstallTimes struct {
	Files  int     `json:"files"`
	Unpack float64 `json:"unpack"`
	Read   float64 `json:"read"`
}

// MakeTarball writes the dependency tree of n files (see MakeTree) as an
// uncompressed tar at path, so every variant unpacks the same bytes.
func MakeTarball(path string, n int, seed uint64) error {
	src, err := os.MkdirTemp("", "vmdock-bench-tree")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	tree := filepath.Join(src, "vendor")
	if _, err := MakeTree(tree, n, seed); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("tarball: %w", err)
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("tarball: %w", err)
	}
	return nil
}

// Install unpacks the tarball into dir (which must not exist), reads every
// file back, and removes dir.
func Install(tarball, dir string) (InstallTimes, error) {
	var t InstallTimes
	var err error
	if t.Unpack, err = InstallPhase(tarball, dir, PhaseUnpack); err != nil {
		return t, err
	}
	if t.Files, err = countFiles(dir); err != nil {
		return t, err
	}
	if t.Read, err = InstallPhase(tarball, dir, PhaseRead); err != nil {
		return t, err
	}
	return t, os.RemoveAll(dir)
}

// PhaseUnpack is Install's first phase; PhaseRead (shared with Tree) its
// second.
const PhaseUnpack = "unpack"

// InstallPhase runs one phase of Install and returns its seconds, so that
// the bench can let a sync mount catch up between them. The read phase
// lists the files before its clock starts and leaves the tree in place.
func InstallPhase(tarball, dir, phase string) (float64, error) {
	switch phase {
	case PhaseUnpack:
		return unpack(tarball, dir)
	case PhaseRead:
		var files []string
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("install read: %w", err)
		}
		start := time.Now()
		buf := make([]byte, 32<<10)
		for _, p := range files {
			if _, err := readAll(p, buf); err != nil {
				return 0, fmt.Errorf("install read: %w", err)
			}
		}
		return time.Since(start).Seconds(), nil
	default:
		return 0, fmt.Errorf("install phase %q: accepted: %s, %s", phase, PhaseUnpack, PhaseRead)
	}
}

func countFiles(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	return n, err
}

func unpack(tarball, dir string) (float64, error) {
	if _, err := os.Lstat(dir); err == nil {
		return 0, fmt.Errorf("install: %s already exists; it must be a fresh path", dir)
	}
	f, err := os.Open(tarball)
	if err != nil {
		return 0, fmt.Errorf("install: %w", err)
	}
	defer f.Close()
	start := time.Now()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("install: %w", err)
		}
		if strings.Contains(hdr.Name, "..") {
			return 0, fmt.Errorf("install: entry %q leaves the tree", hdr.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return 0, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return 0, err
			}
			out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return 0, err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start).Seconds(), nil
}
