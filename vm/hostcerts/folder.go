package hostcerts

import (
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
)

// FolderCerts reads the certificates in dir and its subfolders, the way
// Debian's update-ca-certificates reads /usr/local/share/ca-certificates
// (it takes *.crt; *.pem is taken too, as other distributions' tools do).
// A file that is not a certificate is logged and skipped: the folder is the
// host's, and one stray file there must not stop vmdock. A missing folder
// is an empty set.
func FolderCerts(dir string) ([]Cert, error) {
	var out []Cert
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		ext := strings.ToLower(filepath.Ext(p))
		if d.IsDir() || (ext != ".crt" && ext != ".pem") {
			return nil
		}
		c, err := ReadFile(p)
		if err != nil {
			slog.Warn("skipping a host CA file that is not a certificate", "err", err)
			return nil
		}
		out = append(out, c...)
		return nil
	})
	return out, err
}
