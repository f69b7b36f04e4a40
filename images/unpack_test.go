package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/vmdock/vmdock/images/imagetest"
)

// member is one file of a test archive; imagetest packs it. The tests
// here build members unkeyed, which vet allows only for a local type.
type member struct {
	name string
	data []byte
}

func toImagetest(members []member) []imagetest.Member {
	out := make([]imagetest.Member, len(members))
	for i, m := range members {
		out[i] = imagetest.Member{Name: m.name, Data: m.data}
	}
	return out
}

var fakeDisk = imagetest.Disk

func writeArchive(t *testing.T, path string, members []member) {
	t.Helper()
	if err := imagetest.Write(path, toImagetest(members)); err != nil {
		t.Fatal(err)
	}
}

// fakeImage returns the members of a valid vmdock image for arch; edit
// lets a test damage the manifest, as a Manifest, before it is encoded.
func fakeImage(t testing.TB, arch string, edit func(*Manifest)) []member {
	t.Helper()
	var err error
	members := imagetest.Members(arch, func(raw map[string]any) {
		if edit == nil {
			return
		}
		// Through a Manifest and back; keys a Manifest lacks stay as they are.
		var b []byte
		var m Manifest
		if b, err = json.Marshal(raw); err != nil {
			return
		}
		if err = json.Unmarshal(b, &m); err != nil {
			return
		}
		edit(&m)
		if b, err = json.Marshal(m); err != nil {
			return
		}
		err = json.Unmarshal(b, &raw)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]member, len(members))
	for i, m := range members {
		out[i] = member{m.Name, m.Data}
	}
	return out
}

func TestEnsureVMDockImage(t *testing.T) {
	imgDir := t.TempDir()
	t.Setenv("VMDOCK_IMAGE_DIR", imgDir)
	writeArchive(t, filepath.Join(imgDir, "vmdock-arm64.tar.zst"), fakeImage(t, "arm64", nil))
	cache := t.TempDir()
	img, err := Ensure(context.Background(), "", "arm64", Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if img.Kind != KindVMDock || img.DiskFormat != KindRaw || img.Cmdline != "root=/dev/vda rw console=ttyS0" ||
		img.Manifest == nil || img.Manifest.Packages["docker.io"] != "26.1.5" || img.Arch != "arm64" {
		t.Errorf("image = %+v", img)
	}
	for p, want := range map[string][]byte{img.Kernel: []byte("kernel"), img.Initrd: []byte("initrd"), img.Disk: fakeDisk()} {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: content differs (err %v)", p, err)
		}
	}
	if alloc := allocated(t, img.Disk); alloc >= 1<<20 {
		t.Errorf("disk.raw has %d bytes allocated; zero blocks should be holes", alloc)
	}

	// A damaged unpacked file is noticed and the image unpacked again.
	if err := os.Truncate(img.Disk, 10); err != nil {
		t.Fatal(err)
	}
	img, err = Ensure(context.Background(), "vmdock", "arm64", Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(img.Disk); !bytes.Equal(got, fakeDisk()) {
		t.Error("damaged disk.raw was not unpacked again")
	}

	// Wrong arch for the request.
	writeArchive(t, filepath.Join(imgDir, "vmdock-amd64.tar.zst"), fakeImage(t, "arm64", nil))
	if _, err := Ensure(context.Background(), "vmdock", "amd64", Options{CacheDir: cache}); err == nil || !strings.Contains(err.Error(), "is for arm64, not amd64") {
		t.Errorf("arch mismatch: err = %v", err)
	}
}

func TestEnsureVMDockImageRejectsBadArchives(t *testing.T) {
	tests := []struct {
		name    string
		members func(t *testing.T) []member
		want    string
	}{
		{
			name: "file digest mismatch",
			members: func(t *testing.T) []member {
				return fakeImage(t, "amd64", func(m *Manifest) { m.Files["vmlinuz"] = strings.Repeat("0", 64) })
			},
			want: "vmlinuz: digest mismatch",
		},
		{
			name: "file missing from manifest",
			members: func(t *testing.T) []member {
				return fakeImage(t, "amd64", func(m *Manifest) { delete(m.Files, "initrd.img") })
			},
			want: "manifest lists no digest for initrd.img",
		},
		{
			name:    "no manifest",
			members: func(t *testing.T) []member { return fakeImage(t, "amd64", nil)[1:] },
			want:    "no manifest.json",
		},
		{
			name: "path escape",
			members: func(t *testing.T) []member {
				return append(fakeImage(t, "amd64", nil), member{"../../etc/evil", []byte("x")})
			},
			want: `unexpected member "../../etc/evil"`,
		},
		{
			name: "bad arch",
			members: func(t *testing.T) []member {
				return fakeImage(t, "amd64", func(m *Manifest) { m.Arch = "s390x" })
			},
			want: `architecture "s390x" not supported`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "img.tar.zst")
			writeArchive(t, p, tt.members(t))
			cache := t.TempDir()
			_, err := Ensure(context.Background(), p, "amd64", Options{CacheDir: cache})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if tt.name == "file digest mismatch" && !errors.Is(err, ErrDigestMismatch) {
				t.Errorf("err %v is not ErrDigestMismatch", err)
			}
			if left := dirEntries(t, filepath.Join(cache, "unpacked")); len(left) != 0 {
				t.Errorf("failed unpack left %v", left)
			}
		})
	}
}

// build.sh packs with `tar --sparse --format=gnu`; such archives must unpack too.
func TestEnsureVMDockImageGNUSparseTar(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar")
	}
	src := t.TempDir()
	for _, m := range fakeImage(t, "amd64", nil) {
		if err := os.WriteFile(filepath.Join(src, filepath.Base(m.name)), m.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("tar", "--sparse", "--format=gnu", "-C", src, "-cf", "-", "disk.raw", "vmlinuz", "initrd.img", "manifest.json").Output()
	if err != nil {
		t.Fatalf("tar: %v", err)
	}
	zw, _ := zstd.NewWriter(nil)
	p := filepath.Join(t.TempDir(), "vmdock-amd64.tar.zst")
	if err := os.WriteFile(p, zw.EncodeAll(out, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := Ensure(context.Background(), "file://"+p, "amd64", Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(img.Disk); !bytes.Equal(got, fakeDisk()) {
		t.Error("disk.raw from a GNU sparse tar differs")
	}
}
