package images

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// fuzzLimits keep each fuzz run small: a huge member the fuzzer finds is
// refused the same way at any limit.
var fuzzLimits = unpackLimits{manifest: 64 << 10, kernel: 64 << 10, initrd: 64 << 10, disk: 1 << 20, zstdWindow: 8 << 20}

func FuzzVMDockImage(f *testing.F) {
	// Small files keep each run short: the check's cost is in the bytes
	// it hashes and the files it creates, not in what it decides.
	files := []member{{"disk.raw", bytes.Repeat([]byte("disk"), 1024)}, {"vmlinuz", []byte("kernel")}, {"initrd.img", []byte("initrd")}}
	small := append([]member{{"manifest.json", manifestFor(f, "arm64", files)}}, files...)
	for _, seed := range [][]byte{
		vmdockArchive(f, small),
		vmdockArchive(f, small[1:]),
		vmdockArchive(f, append(small, member{"extra", nil})),
		zstdOf(f, []byte("hi\n")),
		zstdOf(f, headerOnly(f, "vmlinuz", 300<<20)),
		zstdOf(f, paxFlood(f, 3)),
		zstdOf(f, tarOf(f, small), zstd.WithWindowSize(16<<20), zstd.WithSingleSegment(false)),
		nil,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		m, err := unpackVMDock(bytes.NewReader(data), dir, fuzzLimits)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is more than one line", err)
			}
			return
		}
		// Whatever passes is the layout, within the limits, and matches
		// its manifest.
		if m.Arch != "amd64" && m.Arch != "arm64" {
			t.Errorf("accepted arch %q", m.Arch)
		}
		des, _ := os.ReadDir(dir)
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
			fi, _ := de.Info()
			if max, _ := fuzzLimits.of(de.Name()); de.Name() != verifiedName && fi.Size() > max {
				t.Errorf("%s: %d bytes, over the limit %d", de.Name(), fi.Size(), max)
			}
		}
		if want := []string{verifiedName, "disk.raw", "initrd.img", "manifest.json", "vmlinuz"}; !slices.Equal(names, want) {
			t.Errorf("accepted an archive that unpacked to %v", names)
		}
		if _, err := checkUnpacked(dir); err != nil {
			t.Errorf("accepted unpack does not check: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "..", "disk.raw")); err == nil {
			t.Error("wrote outside the unpack folder")
		}
	})
}

// manifestFor is a manifest for files (disk.raw, vmlinuz, initrd.img).
func manifestFor(t testing.TB, arch string, files []member) []byte {
	t.Helper()
	m := Manifest{Arch: arch, Files: map[string]string{}}
	for _, f := range files {
		m.Files[f.name] = strings.TrimPrefix(sha256Of(f.data), "sha256:")
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The fuzz seeds reach the accepting path, and a member exactly at its
// limit passes where one byte more is refused from the header.
func TestUnpackVMDockLimits(t *testing.T) {
	files := []member{{"disk.raw", make([]byte, fuzzLimits.disk)}, {"vmlinuz", make([]byte, fuzzLimits.kernel)}, {"initrd.img", []byte("initrd")}}
	at := append([]member{{"manifest.json", manifestFor(t, "arm64", files)}}, files...)
	if _, err := unpackVMDock(bytes.NewReader(vmdockArchive(t, at)), t.TempDir(), fuzzLimits); err != nil {
		t.Fatalf("members at their limits refused: %v", err)
	}
	over := slices.Clone(at)
	over[2] = member{"vmlinuz", make([]byte, fuzzLimits.kernel+1)}
	_, err := unpackVMDock(bytes.NewReader(vmdockArchive(t, over)), t.TempDir(), fuzzLimits)
	if err == nil || !strings.Contains(err.Error(), `member "vmlinuz" claims 65537 bytes, more than the 64 KiB`) {
		t.Errorf("kernel one byte over: err = %v", err)
	}
}
