package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/images"
	"github.com/vmdock/vmdock/images/imagetest"
)

// goodMembers returns imagetest's image for arch in build.sh's order (the
// image files, then manifest.json), with a kernel per arch and Debian's
// package versions, which Write must copy as they are.
func goodMembers(arch string, edit func(m map[string]any)) []imagetest.Member {
	ms := imagetest.Members(arch, func(m map[string]any) {
		m["kernelVersion"] = "6.12.0-" + arch
		m["buildTime"] = "2025-01-02T03:04:05Z"
		m["suite"] = "trixie"
		m["packages"] = map[string]any{"docker.io": "26.1.5+dfsg1-9", "containerd": "1.7.24~ds1-6", "runc": "1.1.15"}
		if edit != nil {
			edit(m)
		}
	})
	manifest := ms[0]
	manifest.Name = manifestMember
	return append(ms[1:], manifest)
}

// writeArchive writes members as a zstd-compressed tar at p and returns
// the file's bytes.
func writeArchive(t *testing.T, p string, members []imagetest.Member) []byte {
	t.Helper()
	b, err := imagetest.Encode(members)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteRoundTripsThroughParseReleaseManifest(t *testing.T) {
	dir := t.TempDir()
	raw := map[string][]byte{}
	for _, arch := range []string{"amd64", "arm64"} {
		raw[arch] = writeArchive(t, filepath.Join(dir, archiveName(arch)), goodMembers(arch, nil))
	}
	if _, err := Write(dir, "v1.2.3", []string{"amd64", "arm64"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, images.ReleaseManifestName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := images.ParseReleaseManifest(f, "images.json")
	if err != nil {
		t.Fatal(err)
	}
	if got.ImageFormat != images.ImageFormat {
		t.Errorf("imageFormat %d, want %d", got.ImageFormat, images.ImageFormat)
	}
	if len(got.Images) != 2 {
		t.Errorf("images for %d arches, want 2: %+v", len(got.Images), got.Images)
	}
	for arch, b := range raw {
		sum := sha256.Sum256(b)
		want := images.ReleaseImage{
			File:          "vmdock-" + arch + ".tar.zst",
			Size:          int64(len(b)),
			SHA256:        hex.EncodeToString(sum[:]),
			Kernel:        "6.12.0-" + arch,
			Docker:        "26.1.5+dfsg1-9",
			Containerd:    "1.7.24~ds1-6",
			VMDockVersion: "v1.2.3",
			BuildTime:     "2025-01-02T03:04:05Z",
		}
		img, err := got.ForArch(arch, "images.json")
		if err != nil {
			t.Fatal(err)
		}
		if img != want {
			t.Errorf("%s:\n got %+v\nwant %+v", arch, img, want)
		}
	}
}

func TestWriteOneArch(t *testing.T) {
	dir := t.TempDir()
	writeArchive(t, filepath.Join(dir, archiveName("amd64")), goodMembers("amd64", nil))
	m, err := Write(dir, "v1", []string{"amd64"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Images["arm64"]; ok || len(m.Images) != 1 {
		t.Errorf("images %+v, want amd64 only", m.Images)
	}
}

// The sha256 covers the whole file: bytes after the last zstd frame are
// part of what users download and verify.
func TestSHA256CoversTrailingBytes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, archiveName("amd64"))
	b := writeArchive(t, p, goodMembers("amd64", nil))
	before, _, _, err := inspect(p)
	if err != nil {
		t.Fatal(err)
	}
	if before != int64(len(b)) {
		t.Fatalf("size %d, want %d", before, len(b))
	}
	// A skippable zstd frame (magic 0x184D2A50, 4-byte length) decodes to
	// nothing but is still in the file.
	skip := append([]byte{0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0}, "pad!"...)
	b = append(b, skip...)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	size, sum, _, err := inspect(p)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(b)
	if size != int64(len(b)) || sum != hex.EncodeToString(want[:]) {
		t.Errorf("size %d sha256 %s, want %d %x", size, sum, len(b), want)
	}
}

func TestWriteRefuses(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, p string)
		version string
		want    string
	}{
		{"missing archive", func(*testing.T, string) {}, "v1", "no such file"},
		{"not zstd", func(t *testing.T, p string) {
			os.WriteFile(p, []byte("plain text, not an image"), 0o644)
		}, "v1", "vmdock-amd64.tar.zst"},
		{"no manifest", func(t *testing.T, p string) {
			writeArchive(t, p, goodMembers("amd64", nil)[:3])
		}, "v1", "no manifest.json"},
		{"member differs from its sum", func(t *testing.T, p string) {
			ms := goodMembers("amd64", nil)
			ms[1].Data = []byte("another kernel")
			writeArchive(t, p, ms)
		}, "v1", "vmlinuz: sha256"},
		{"member missing", func(t *testing.T, p string) {
			ms := goodMembers("amd64", nil)
			writeArchive(t, p, append(ms[:2:2], ms[3]))
		}, "v1", "no initrd.img"},
		{"unexpected member", func(t *testing.T, p string) {
			writeArchive(t, p, append([]imagetest.Member{{Name: "etc/passwd", Data: []byte("x")}}, goodMembers("amd64", nil)...))
		}, "v1", `unexpected member "etc/passwd"`},
		{"other arch inside", func(t *testing.T, p string) {
			writeArchive(t, p, goodMembers("arm64", nil))
		}, "v1", `says arch "arm64"`},
		{"no docker version", func(t *testing.T, p string) {
			writeArchive(t, p, goodMembers("amd64", func(m map[string]any) {
				delete(m["packages"].(map[string]any), "docker.io")
			}))
		}, "v1", `packages["docker.io"]`},
		{"no containerd version", func(t *testing.T, p string) {
			writeArchive(t, p, goodMembers("amd64", func(m map[string]any) {
				delete(m["packages"].(map[string]any), "containerd")
			}))
		}, "v1", `packages["containerd"]`},
		{"no kernel version", func(t *testing.T, p string) {
			writeArchive(t, p, goodMembers("amd64", func(m map[string]any) { delete(m, "kernelVersion") }))
		}, "v1", "kernelVersion"},
		{"no version", func(t *testing.T, p string) {
			writeArchive(t, p, goodMembers("amd64", nil))
		}, "", "--version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, filepath.Join(dir, archiveName("amd64")))
			out := filepath.Join(dir, images.ReleaseManifestName)
			old := []byte(`{"old": true}`)
			if err := os.WriteFile(out, old, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Write(dir, tc.version, []string{"amd64"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
			if b, _ := os.ReadFile(out); !bytes.Equal(b, old) {
				t.Errorf("images.json changed on failure: %s", b)
			}
		})
	}
}

func TestParseArches(t *testing.T) {
	for in, want := range map[string][]string{
		"amd64,arm64":   {"amd64", "arm64"},
		"arm64":         {"arm64"},
		"amd64 arm64":   {"amd64", "arm64"},
		"arm64,,amd64,": {"arm64", "amd64"},
		"amd64,amd64":   {"amd64"},
	} {
		got, err := parseArches(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseArches(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", " , ", "x86_64", "amd64,riscv64"} {
		if got, err := parseArches(in); err == nil {
			t.Errorf("parseArches(%q) = %v, want an error", in, got)
		}
	}
}
