package review

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxFileBytes bounds a guest file held for a diff or an accept: the
// guest decides what it sends, and a file past this is named, not read.
const maxFileBytes = 64 << 20

// entry is one path on one side.
type entry struct {
	sig     string // "" absent; "f:<sha256>", "x:<sha256>" (executable), "l:<target>"
	content []byte // guest files that differ from the host's
	tooBig  bool
}

func (e entry) isLink() bool { return strings.HasPrefix(e.sig, "l:") }
func (e entry) exec() bool   { return strings.HasPrefix(e.sig, "x:") }

func fileSig(content []byte, exec bool) string {
	sum := sha256.Sum256(content)
	kind := "f:"
	if exec {
		kind = "x:"
	}
	return kind + hex.EncodeToString(sum[:])
}

// hostTree sums every file and symlink under root, by slash path.
func hostTree(root string) (map[string]entry, error) {
	tree := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			tree[rel] = entry{sig: "l:" + target}
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			tree[rel] = entry{sig: fileSig(b, fi.Mode()&0o111 != 0)}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the workspace %s: %w", root, err)
	}
	return tree, nil
}

// guestTree reads the guest copy from a tar stream. Only contents that
// differ from host are kept. Names are checked: the guest is the
// sandbox's, and its tar may say anything.
func guestTree(r io.Reader, host map[string]entry) (map[string]entry, error) {
	tree := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tree, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the guest's copy: %w", err)
		}
		name, ok := cleanName(h.Name)
		if !ok {
			continue
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			tree[name] = entry{sig: "l:" + h.Linkname}
		case tar.TypeReg:
			if h.Size > maxFileBytes {
				tree[name] = entry{sig: fmt.Sprintf("big:%d:%d", h.Size, h.ModTime.UnixNano()), tooBig: true}
				continue
			}
			b, err := io.ReadAll(io.LimitReader(tr, maxFileBytes))
			if err != nil {
				return nil, fmt.Errorf("read the guest's copy of %s: %w", name, err)
			}
			e := entry{sig: fileSig(b, h.Mode&0o111 != 0)}
			if e.sig != host[name].sig {
				e.content = b
			}
			tree[name] = e
		}
	}
}

// cleanName is a tar member's path relative to the workspace, or false
// for one that would leave it.
func cleanName(name string) (string, bool) {
	name = path.Clean(strings.TrimPrefix(name, "./"))
	if name == "." || name == "" || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
		return "", false
	}
	return name, true
}
