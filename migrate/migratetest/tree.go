// Package migratetest starts throwaway dockerds on a Linux host and makes
// the test data that migrate's tests, its e2e check and its bench share:
// an imported test image's files, a volume's test tree as a tar stream,
// and a volume's files read back for comparison.
package migratetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"sort"
	"time"
)

// ImageTar is a tar of files (name → contents, mode 0755) for an image
// import (POST /images/create?fromSrc=-, docker import), so nothing is
// pulled. Names go in sorted order, so the same files give the same layer.
func ImageTar(files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		data := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(1700000000, 0)}); err != nil {
			return nil, fmt.Errorf("image tar %s: %w", name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("image tar %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image tar: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteVolumeTree writes, as a tar stream under the folder root, what a
// volume copy must keep: blobs files of blobBytes random bytes in blobs/
// (uid 33, 0750), a 0600 file "secret" of uid 1234, a symlink "latest" to
// the last blob and an empty folder "empty" (0700).
func WriteVolumeTree(w io.Writer, root string, blobs, blobBytes int) error {
	tw := tar.NewWriter(w)
	rng := rand.New(rand.NewPCG(1, 2))
	mtime := time.Unix(1690000000, 0)
	write := func(h *tar.Header, data []byte) error {
		h.ModTime = mtime
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("volume tree %s: %w", h.Name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("volume tree %s: %w", h.Name, err)
		}
		return nil
	}
	entries := []struct {
		h    *tar.Header
		data []byte
	}{
		{&tar.Header{Name: root + "/", Typeflag: tar.TypeDir, Mode: 0o755}, nil},
		{&tar.Header{Name: root + "/blobs/", Typeflag: tar.TypeDir, Mode: 0o750, Uid: 33, Gid: 33}, nil},
	}
	for _, e := range entries {
		if err := write(e.h, e.data); err != nil {
			return err
		}
	}
	data := make([]byte, blobBytes)
	for i := range blobs {
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if err := write(&tar.Header{Name: fmt.Sprintf("%s/blobs/b%d", root, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}, data); err != nil {
			return err
		}
	}
	entries = []struct {
		h    *tar.Header
		data []byte
	}{
		{&tar.Header{Name: root + "/secret", Typeflag: tar.TypeReg, Mode: 0o600, Uid: 1234, Gid: 1234, Size: 6}, []byte("hush!\n")},
		{&tar.Header{Name: root + "/latest", Typeflag: tar.TypeSymlink, Linkname: fmt.Sprintf("blobs/b%d", blobs-1), Mode: 0o777}, nil},
		{&tar.Header{Name: root + "/empty/", Typeflag: tar.TypeDir, Mode: 0o700}, nil},
	}
	for _, e := range entries {
		if err := write(e.h, e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("volume tree: %w", err)
	}
	return nil
}

// VolumeTreeEntries is how many entries WriteVolumeTree writes.
func VolumeTreeEntries(blobs int) int { return blobs + 5 }

// FileFacts is one entry of a volume as compared between engines.
type FileFacts struct {
	// Mode is the type and permission bits as a file system has them:
	// engines write the tar mode field differently (Docker 20.10 keeps
	// the C type bits in it, newer engines only the permissions).
	Mode     fs.FileMode
	UID, GID int
	Link     string
	SHA256   string
	ModTime  time.Time
}

// ReadTree reads a tar stream (an engine's GET /containers/{id}/archive,
// docker cp ... -) into each entry's facts, by name.
func ReadTree(r io.Reader) (map[string]FileFacts, error) {
	out := map[string]FileFacts{}
	tr := tar.NewReader(r)
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read a volume's tar: %w", err)
		}
		sum := sha256.New()
		if _, err := io.Copy(sum, tr); err != nil {
			return nil, fmt.Errorf("read %s from a volume's tar: %w", hd.Name, err)
		}
		out[hd.Name] = FileFacts{Mode: hd.FileInfo().Mode(), UID: hd.Uid, GID: hd.Gid, Link: hd.Linkname, SHA256: hex.EncodeToString(sum.Sum(nil)), ModTime: hd.ModTime}
	}
}
