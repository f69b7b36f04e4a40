package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/internal/fsutil"
)

// readTar returns every regular file and symlink of a tar, by name.
func readTar(t *testing.T, b []byte) (files map[string][]byte, hdrs map[string]*tar.Header) {
	t.Helper()
	files, hdrs = map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, hdrs
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", h.Name, err)
		}
		files[h.Name] = data
		hdrs[h.Name] = h
	}
}

func testImage(t *testing.T) image {
	t.Helper()
	layer, err := buildLayer(layerEntries([]byte("fake busybox"), []byte("fake echo-server")))
	if err != nil {
		t.Fatal(err)
	}
	return image{Repo: "vmdock-test", Tag: "latest", Arch: "arm64", Cmd: []string{"/echo-server"},
		Ports: []string{"80/tcp", "81/udp"}, Layer: layer}
}

func TestSaveTarballStructure(t *testing.T) {
	img := testImage(t)
	var buf bytes.Buffer
	if err := writeSave(&buf, img); err != nil {
		t.Fatal(err)
	}
	files, _ := readTar(t, buf.Bytes())

	var manifest []saveManifest
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(manifest) != 1 {
		t.Fatalf("manifest has %d images, want 1", len(manifest))
	}
	m := manifest[0]
	if len(m.RepoTags) != 1 || m.RepoTags[0] != "vmdock-test:latest" {
		t.Errorf("RepoTags = %v, want [vmdock-test:latest]", m.RepoTags)
	}
	cfgJSON, ok := files[m.Config]
	if !ok {
		t.Fatalf("config %s named by manifest is not in the tarball", m.Config)
	}
	if sum := sha256.Sum256(cfgJSON); hex.EncodeToString(sum[:])+".json" != m.Config {
		t.Errorf("config file name %s is not its sha256", m.Config)
	}
	var cfg imageConfig
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatalf("config: %v", err)
	}
	if cfg.Architecture != "arm64" || cfg.OS != "linux" {
		t.Errorf("platform = %s/%s, want linux/arm64", cfg.OS, cfg.Architecture)
	}
	if strings.Join(cfg.Config.Cmd, " ") != "/echo-server" {
		t.Errorf("Cmd = %v, want [/echo-server]", cfg.Config.Cmd)
	}
	if _, ok := cfg.Config.ExposedPorts["81/udp"]; !ok {
		t.Errorf("ExposedPorts = %v, want 81/udp in it", cfg.Config.ExposedPorts)
	}
	if len(m.Layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 {
		t.Fatalf("layers = %v, diff_ids = %v, want one each", m.Layers, cfg.RootFS.DiffIDs)
	}
	layer, ok := files[m.Layers[0]]
	if !ok {
		t.Fatalf("layer %s named by manifest is not in the tarball", m.Layers[0])
	}
	sum := sha256.Sum256(layer)
	layerHex := hex.EncodeToString(sum[:])
	if cfg.RootFS.DiffIDs[0] != "sha256:"+layerHex {
		t.Errorf("diff_id = %s, layer sha256 = %s", cfg.RootFS.DiffIDs[0], layerHex)
	}
	var repos map[string]map[string]string
	if err := json.Unmarshal(files["repositories"], &repos); err != nil {
		t.Fatalf("repositories: %v", err)
	}
	if repos["vmdock-test"]["latest"] != layerHex {
		t.Errorf("repositories = %v, want vmdock-test:latest -> %s", repos, layerHex)
	}
}

func TestLayerContents(t *testing.T) {
	files, hdrs := readTar(t, testImage(t).Layer)
	tests := []struct {
		name     string
		typ      byte
		mode     int64
		link     string
		contents string
	}{
		{"bin/", tar.TypeDir, 0o755, "", ""},
		{"bin/busybox", tar.TypeReg, 0o755, "", "fake busybox"},
		{"echo-server", tar.TypeReg, 0o755, "", "fake echo-server"},
		{"tmp/", tar.TypeDir, 0o1777, "", ""},
	}
	for _, a := range []string{"sh", "echo", "cat", "ls", "nc", "wget", "sleep"} {
		tests = append(tests, struct {
			name     string
			typ      byte
			mode     int64
			link     string
			contents string
		}{"bin/" + a, tar.TypeSymlink, 0o777, "busybox", ""})
	}
	for _, tt := range tests {
		h, ok := hdrs[tt.name]
		if !ok {
			t.Errorf("%s missing from layer", tt.name)
			continue
		}
		if h.Typeflag != tt.typ || h.Mode != tt.mode || h.Linkname != tt.link {
			t.Errorf("%s: type %c mode %o link %q, want %c %o %q", tt.name, h.Typeflag, h.Mode, h.Linkname, tt.typ, tt.mode, tt.link)
		}
		if string(files[tt.name]) != tt.contents {
			t.Errorf("%s: contents %q, want %q", tt.name, files[tt.name], tt.contents)
		}
		if !h.ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want %v", tt.name, h.ModTime, epoch)
		}
	}
}

func TestSaveIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := writeSave(&a, testImage(t)); err != nil {
		t.Fatal(err)
	}
	if err := writeSave(&b, testImage(t)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two writes of the same image differ")
	}
}

func TestReadStaticELF(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	tests := []struct {
		name, path, arch, errHas string
		needBusybox              bool
	}{
		{"not an ELF", notELF, runtime.GOARCH, "read " + notELF, false},
		{"missing", filepath.Join(dir, "nope"), runtime.GOARCH, "read ", false},
		{"wrong arch", "/bin/busybox", other, "is built for", true},
		{"static busybox", "/bin/busybox", runtime.GOARCH, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needBusybox && (other == "" || !fsutil.Exists("/bin/busybox")) {
				t.Skip("needs the host's /bin/busybox (busybox-static) on amd64/arm64")
			}
			_, err := readStaticELF(tt.path, tt.arch)
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("readStaticELF = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("readStaticELF = %v, want error containing %q", err, tt.errHas)
			}
		})
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	tests := []struct{ arch, out, errHas string }{
		{"s390x", "x.tar", `bad --arch "s390x" (accepted: amd64, arm64)`},
		{"amd64", "", "missing --out"},
	}
	for _, tt := range tests {
		err := run(tt.arch, tt.out, "", "")
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("run(%q, %q) = %v, want error containing %q", tt.arch, tt.out, err, tt.errHas)
		}
	}
}
