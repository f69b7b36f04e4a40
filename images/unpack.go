package images

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Manifest describes a vmdock image; it is manifest.json in the archive.
type Manifest struct {
	Arch      string            `json:"arch"`
	Cmdline   string            `json:"cmdline"`  // kernel command line
	Files     map[string]string `json:"files"`    // file name -> sha256 (hex, "sha256:" prefix optional)
	Packages  map[string]string `json:"packages"` // Debian package -> version
	BuildTime string            `json:"buildTime"`
}

// imageFiles are the files a vmdock archive must carry besides the manifest.
var imageFiles = []string{"disk.raw", "vmlinuz", "initrd.img"}

const (
	manifestName = "manifest.json"
	verifiedName = ".verified" // sizes of the verified files, written last
)

// unpacked returns the manifest of the image unpacked in dir, unpacking
// blob there first unless an earlier unpack finished and its files still
// have the sizes it recorded.
func (c *Cache) unpacked(blob, dir string) (*Manifest, error) {
	if m, err := checkUnpacked(dir); err == nil {
		return m, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		slog.Warn("unpacked image is damaged; unpacking it again", "dir", dir, "err", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("unpack image: %w", err)
	}
	defer os.RemoveAll(tmp)
	m, err := unpackArchive(blob, tmp)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("unpack image: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("unpack image: %w", err)
	}
	return m, nil
}

func checkUnpacked(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, verifiedName))
	if err != nil {
		return nil, err
	}
	var sizes map[string]int64
	if err := json.Unmarshal(b, &sizes); err != nil {
		return nil, fmt.Errorf("%s: %w", verifiedName, err)
	}
	for name, size := range sizes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, errors.Unwrap(err))
		}
		if fi.Size() != size {
			return nil, fmt.Errorf("%s: size %d, want %d", name, fi.Size(), size)
		}
	}
	return readManifest(filepath.Join(dir, manifestName))
}

func readManifest(p string) (*Manifest, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("image manifest %s: %w", p, err)
	}
	return &m, nil
}

// unpackArchive unpacks a vmdock .tar.zst into dir and checks every file
// against the manifest. disk.raw is written sparse: its zero blocks become
// holes, so a 4 GiB disk takes only the space its data needs.
func unpackArchive(blob, dir string) (*Manifest, error) {
	f, err := os.Open(blob)
	if err != nil {
		return nil, fmt.Errorf("unpack image: %w", err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("unpack image %s: %w", blob, err)
	}
	defer zr.Close()

	sums := map[string]string{}
	sizes := map[string]int64{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("unpack image %s: %w", blob, err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if hdr.Typeflag == tar.TypeDir && (name == "." || name == "") {
			continue
		}
		if !isImageMember(name) {
			return nil, fmt.Errorf("unpack image %s: unexpected member %q (want %s, %s)", blob, hdr.Name, strings.Join(imageFiles, ", "), manifestName)
		}
		// archive/tar expands the holes of sparse members (build.sh uses GNU
		// tar --sparse) but keeps the old-GNU 'S' type flag.
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeGNUSparse {
			return nil, fmt.Errorf("unpack image %s: member %q is not a regular file", blob, hdr.Name)
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("unpack image %s: member %q appears twice", blob, name)
		}
		out, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("unpack image: %w", err)
		}
		h := sha256.New()
		n, err := writeSparse(out, io.TeeReader(tr, h))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("unpack image %s: %s: %w", blob, name, err)
		}
		sums[name] = hex.EncodeToString(h.Sum(nil))
		sizes[name] = n
	}

	m, err := readManifest(filepath.Join(dir, manifestName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("unpack image %s: no %s in the archive", blob, manifestName)
		}
		return nil, err
	}
	if err := m.check(sums); err != nil {
		return nil, fmt.Errorf("unpack image %s: %w", blob, err)
	}
	b, _ := json.Marshal(sizes)
	if err := os.WriteFile(filepath.Join(dir, verifiedName), b, 0o644); err != nil {
		return nil, fmt.Errorf("unpack image: %w", err)
	}
	return m, nil
}

func isImageMember(name string) bool {
	if name == manifestName {
		return true
	}
	for _, f := range imageFiles {
		if name == f {
			return true
		}
	}
	return false
}

// check verifies the unpacked files' sha256 sums against the manifest.
func (m *Manifest) check(sums map[string]string) error {
	if err := checkArch(m.Arch); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	for _, name := range imageFiles {
		want, ok := m.Files[name]
		if !ok {
			return fmt.Errorf("manifest lists no digest for %s", name)
		}
		got, ok := sums[name]
		if !ok {
			return fmt.Errorf("archive has no %s", name)
		}
		want = strings.ToLower(strings.TrimPrefix(want, "sha256:"))
		if got != want {
			return fmt.Errorf("%s: %w: manifest says sha256:%s, file is sha256:%s", name, ErrDigestMismatch, want, got)
		}
	}
	return nil
}
