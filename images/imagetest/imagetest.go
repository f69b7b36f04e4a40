// Package imagetest writes small vmdock image archives for tests: the
// layout hack/image/build.sh makes (manifest.json, disk.raw, vmlinuz,
// initrd.img in a zstd tar), with a 4 MiB disk instead of 1.3 GB.
package imagetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"

	"github.com/klauspost/compress/zstd"
)

// Member is one file of an archive.
type Member struct {
	Name string
	Data []byte
}

// Disk is 4 MiB with data at both ends and zeros between, so a sparse
// unpack has a hole to leave.
func Disk() []byte {
	d := make([]byte, 4<<20)
	copy(d, "ext4 superblock, honestly")
	copy(d[len(d)-100:], "last block")
	return d
}

// Members returns a valid image for arch, manifest first; edit may change
// the manifest (a JSON object) before it is encoded.
func Members(arch string, edit func(manifest map[string]any)) []Member {
	files := []Member{{"disk.raw", Disk()}, {"vmlinuz", []byte("kernel")}, {"initrd.img", []byte("initrd")}}
	sums := map[string]any{}
	for _, f := range files {
		s := sha256.Sum256(f.Data)
		sums[f.Name] = hex.EncodeToString(s[:])
	}
	m := map[string]any{
		"arch": arch, "cmdline": "root=/dev/vda rw console=ttyS0", "kernelVersion": "6.12.0-test",
		"buildTime": "2026-01-01T00:00:00Z", "files": sums,
		"packages": map[string]any{"docker.io": "26.1.5", "containerd": "1.7.24"},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // a test's own map: cannot fail to encode
	}
	return append([]Member{{"./manifest.json", b}}, files...)
}

// Tar packs members as regular files in an uncompressed tar, for a test
// that compresses it its own way.
func Tar(members []Member) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		if err := tw.WriteHeader(&tar.Header{Name: m.Name, Mode: 0o644, Size: int64(len(m.Data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(m.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Encode packs members as a zstd tar.
func Encode(members []Member) ([]byte, error) {
	t, err := Tar(members)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(t); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write packs members into the file at path.
func Write(path string, members []Member) error {
	b, err := Encode(members)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
