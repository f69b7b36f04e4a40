package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"time"
)

// epoch is the mtime of every tar entry and the image's creation time, so
// the same inputs always give the same tarball (and the same image ID).
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// entry is one file system object in the image's single layer.
type entry struct {
	Name string // relative, no leading slash
	Mode int64
	Data []byte // regular file contents
	Link string // symlink target; the entry is a symlink when set
	Dir  bool
}

// image is everything a docker-save tarball of a one-layer image needs.
type image struct {
	Repo, Tag string
	Arch      string
	Cmd       []string
	Env       []string
	Ports     []string // e.g. "80/tcp"
	Layer     []byte   // uncompressed layer tar
}

// buildLayer writes entries as an uncompressed tar with fixed owners and
// times, parents before children.
func buildLayer(entries []entry) ([]byte, error) {
	sorted := append([]entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range sorted {
		h := &tar.Header{
			Name:    e.Name,
			Mode:    e.Mode,
			ModTime: epoch,
			Format:  tar.FormatUSTAR,
		}
		switch {
		case e.Dir:
			h.Typeflag = tar.TypeDir
			h.Name = e.Name + "/"
		case e.Link != "":
			h.Typeflag = tar.TypeSymlink
			h.Linkname = e.Link
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, fmt.Errorf("layer entry %s: %w", e.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}

// Types of the docker-save format ("docker save" before the OCI layout).
type saveManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

type imageConfig struct {
	Architecture string         `json:"architecture"`
	OS           string         `json:"os"`
	Created      time.Time      `json:"created"`
	Config       runConfig      `json:"config"`
	RootFS       rootFS         `json:"rootfs"`
	History      []historyEntry `json:"history"`
}

type runConfig struct {
	Cmd          []string            `json:"Cmd"`
	Env          []string            `json:"Env,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type historyEntry struct {
	Created   time.Time `json:"created"`
	CreatedBy string    `json:"created_by"`
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// writeSave writes img as a tarball that `docker load` accepts: the layer,
// the config named by its digest, manifest.json and repositories.
func writeSave(w io.Writer, img image) error {
	layerHex := sha256hex(img.Layer)
	cfg := imageConfig{
		Architecture: img.Arch,
		OS:           "linux",
		Created:      epoch,
		Config:       runConfig{Cmd: img.Cmd, Env: img.Env},
		RootFS:       rootFS{Type: "layers", DiffIDs: []string{"sha256:" + layerHex}},
		History:      []historyEntry{{Created: epoch, CreatedBy: "vmdock hack/testimage"}},
	}
	if len(img.Ports) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range img.Ports {
			cfg.Config.ExposedPorts[p] = struct{}{}
		}
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("marshal image config: %w", err)
	}
	cfgName := sha256hex(cfgJSON) + ".json"
	layerName := path.Join(layerHex, "layer.tar")
	ref := img.Repo + ":" + img.Tag

	manifest, err := json.Marshal([]saveManifest{{Config: cfgName, RepoTags: []string{ref}, Layers: []string{layerName}}})
	if err != nil {
		return fmt.Errorf("marshal manifest: %w", err)
	}
	repos, err := json.Marshal(map[string]map[string]string{img.Repo: {img.Tag: layerHex}})
	if err != nil {
		return fmt.Errorf("marshal repositories: %w", err)
	}

	tw := tar.NewWriter(w)
	files := []struct {
		name string
		data []byte
	}{
		{layerHex + "/VERSION", []byte("1.0")},
		{layerName, img.Layer},
		{cfgName, cfgJSON},
		{"manifest.json", manifest},
		{"repositories", repos},
	}
	if err := tw.WriteHeader(&tar.Header{Name: layerHex + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch, Format: tar.FormatUSTAR}); err != nil {
		return fmt.Errorf("write %s: %w", layerHex, err)
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close image tar: %w", err)
	}
	return nil
}
