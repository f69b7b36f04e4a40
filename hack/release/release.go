package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/internal/atomicfile"
)

// imageManifest is the part of an archive's manifest.json (written by
// hack/image/build.sh) that a release publishes or checks.
type imageManifest struct {
	Arch          string            `json:"arch"`
	KernelVersion string            `json:"kernelVersion"`
	BuildTime     string            `json:"buildTime"`
	Files         map[string]string `json:"files"`    // member -> sha256 hex
	Packages      map[string]string `json:"packages"` // Debian package -> version
}

const manifestMember = "manifest.json"

// imageMembers are the files besides the manifest every archive carries.
var imageMembers = []string{"disk.raw", "vmlinuz", "initrd.img"}

// maxManifest caps what is buffered of manifest.json.
const maxManifest = 1 << 20

// archiveName is the file a release publishes for arch.
func archiveName(arch string) string { return "vmdock-" + arch + ".tar.zst" }

// parseArches reads --arch: known arches, each once, in the order given.
func parseArches(s string) ([]string, error) {
	var out []string
	for _, a := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if a != "amd64" && a != "arm64" {
			return nil, fmt.Errorf("--arch %q: want amd64 or arm64", a)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--arch: name at least one arch")
	}
	return out, nil
}

// Write inspects each arch's archive in dir and replaces dir/images.json
// with the manifest that publishes them. On any error images.json is left
// as it was, so a half-checked release is never described.
func Write(dir, version string, arches []string) (*images.ReleaseManifest, error) {
	b, err := Build(dir, version, arches)
	if err != nil {
		return nil, err
	}
	// What vmdock will parse is what is written: a manifest it would
	// refuse fails here, not on users' machines.
	out := filepath.Join(dir, images.ReleaseManifestName)
	m, err := images.ParseReleaseManifest(bytes.NewReader(b), out)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(out, b, 0o644); err != nil {
		return nil, err
	}
	return m, nil
}

// Build returns images.json for arches' archives in dir.
func Build(dir, version string, arches []string) ([]byte, error) {
	if version == "" {
		return nil, errors.New("--version is required: the vmdock version these images are published with")
	}
	rm := images.ReleaseManifest{ImageFormat: images.ImageFormat, Images: map[string]images.ReleaseImage{}}
	for _, arch := range arches {
		img, err := releaseImage(dir, arch, version)
		if err != nil {
			return nil, err
		}
		rm.Images[arch] = img
	}
	b, err := json.MarshalIndent(rm, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func releaseImage(dir, arch, version string) (images.ReleaseImage, error) {
	name := archiveName(arch)
	p := filepath.Join(dir, name)
	size, sum, m, err := inspect(p)
	if err != nil {
		return images.ReleaseImage{}, fmt.Errorf("%s: %w", p, err)
	}
	if m.Arch != arch {
		return images.ReleaseImage{}, fmt.Errorf("%s: its manifest.json says arch %q", p, m.Arch)
	}
	img := images.ReleaseImage{
		File:          name,
		Size:          size,
		SHA256:        sum,
		Kernel:        m.KernelVersion,
		Docker:        m.Packages["docker.io"],
		Containerd:    m.Packages["containerd"],
		VMDockVersion: version,
		BuildTime:     m.BuildTime,
	}
	// Users see these before they download; an image without them was not
	// made by build.sh.
	for _, f := range []struct{ name, v string }{
		{"kernelVersion", img.Kernel},
		{`packages["docker.io"]`, img.Docker},
		{`packages["containerd"]`, img.Containerd},
	} {
		if f.v == "" {
			return images.ReleaseImage{}, fmt.Errorf("%s: its manifest.json has no %s", p, f.name)
		}
	}
	return img, nil
}

// inspect reads an archive once, end to end: its size and sha256 as
// published, and its manifest.json, with every member's sha256 checked
// against that manifest as vmdock does after a download, so a release
// never lists an archive its users would refuse.
func inspect(p string) (size int64, sum string, m *imageManifest, err error) {
	f, err := os.Open(p)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the caller names p
		}
		return 0, "", nil, err
	}
	defer f.Close()
	whole := &hashCounter{h: sha256.New()}
	raw := io.TeeReader(f, whole)
	// One decoding goroutine, the caller's: nothing reads raw behind our
	// back, so every byte of the file goes through whole exactly once.
	zr, err := zstd.NewReader(raw, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return 0, "", nil, err
	}
	defer zr.Close()
	m, err = readMembers(tar.NewReader(zr))
	if err != nil {
		return 0, "", nil, err
	}
	// Decode what follows the tar's end too (the zstd frames' checksums),
	// then hash any bytes the decoder did not need.
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return 0, "", nil, fmt.Errorf("after the tar: %w", err)
	}
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return 0, "", nil, err
	}
	return whole.n, hex.EncodeToString(whole.h.Sum(nil)), m, nil
}

// readMembers hashes each member, keeps manifest.json, and checks the
// members against it.
func readMembers(tr *tar.Reader) (*imageManifest, error) {
	sums := map[string]string{}
	var manifest []byte
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a zstd-compressed tar: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if hdr.Typeflag == tar.TypeDir && name == "." {
			continue
		}
		if name != manifestMember && !slices.Contains(imageMembers, name) {
			return nil, fmt.Errorf("unexpected member %q (want %s, %s)", hdr.Name, strings.Join(imageMembers, ", "), manifestMember)
		}
		// build.sh packs disk.raw with GNU tar --sparse; archive/tar
		// expands its holes and keeps the old-GNU 'S' flag.
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeGNUSparse {
			return nil, fmt.Errorf("member %q is not a regular file", hdr.Name)
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("member %q appears twice", name)
		}
		h := sha256.New()
		var r io.Reader = io.TeeReader(tr, h)
		if name == manifestMember {
			manifest, err = io.ReadAll(io.LimitReader(r, maxManifest+1))
			if err == nil && len(manifest) > maxManifest {
				err = fmt.Errorf("larger than %d bytes", maxManifest)
			}
		} else {
			_, err = io.Copy(io.Discard, r)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		sums[name] = hex.EncodeToString(h.Sum(nil))
	}
	if manifest == nil {
		return nil, fmt.Errorf("no %s in the archive", manifestMember)
	}
	var m imageManifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestMember, err)
	}
	for _, name := range imageMembers {
		want, ok := m.Files[name]
		if !ok {
			return nil, fmt.Errorf("%s lists no sha256 for %s", manifestMember, name)
		}
		got, ok := sums[name]
		if !ok {
			return nil, fmt.Errorf("the archive has no %s", name)
		}
		if want = strings.ToLower(strings.TrimPrefix(want, "sha256:")); got != want {
			return nil, fmt.Errorf("%s: sha256 %s, but %s says %s", name, got, manifestMember, want)
		}
	}
	return &m, nil
}

// hashCounter hashes and counts what is written to it.
type hashCounter struct {
	h hash.Hash
	n int64
}

func (c *hashCounter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}
