package images

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/internal/diskfree"
)

func needQemuImg(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"qemu-img", "qemu-io"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// writes puts recognisable data at several places, including the last,
// partial cluster, and zeroes a written cluster so v3 images get a zero flag.
var qemuIOWrites = []string{
	"write -P 0xab 1M 64k",
	"write -P 0xcd 3M 1M",
	"write -P 0x11 6M 64k",
	"write -z 6M 64k",
	"write -P 0x5a 7M 4k",
	"write -P 0xee 10236k 4k",
}

func makeQCOW2(t *testing.T, dir, name string, createOpts string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	args := []string{"create", "-q", "-f", "qcow2"}
	if createOpts != "" {
		args = append(args, "-o", createOpts)
	}
	run(t, "qemu-img", append(args, p, "10240k")...)
	for _, w := range qemuIOWrites {
		run(t, "qemu-io", "-f", "qcow2", "-c", w, p)
	}
	return p
}

func TestConvertQCOW2MatchesQemuImg(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	tests := []struct {
		name       string
		createOpts string
		compress   string // "" | "zlib" | "zstd": recompress with qemu-img convert -c
	}{
		{name: "v3", createOpts: ""},
		{name: "v2", createOpts: "compat=0.10"},
		{name: "small-clusters", createOpts: "cluster_size=4096"},
		{name: "big-clusters", createOpts: "cluster_size=2M"},
		{name: "compressed-deflate", compress: "zlib"},
		{name: "compressed-v2", createOpts: "compat=0.10", compress: "zlib"},
		{name: "compressed-small-clusters", createOpts: "cluster_size=4096", compress: "zlib"},
		{name: "compressed-zstd", compress: "zstd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := makeQCOW2(t, dir, tt.name+".qcow2", tt.createOpts)
			if tt.compress != "" {
				c := filepath.Join(dir, tt.name+"-c.qcow2")
				opts := "compression_type=" + tt.compress
				if strings.Contains(tt.createOpts, "compat=0.10") {
					opts = "compat=0.10"
				}
				if strings.Contains(tt.createOpts, "cluster_size") {
					opts += "," + tt.createOpts
				}
				out, err := exec.Command("qemu-img", "convert", "-c", "-O", "qcow2", "-o", opts, src, c).CombinedOutput()
				if err != nil && tt.compress == "zstd" {
					t.Skipf("qemu-img without zstd: %s", out)
				}
				if err != nil {
					t.Fatalf("qemu-img convert -c: %v\n%s", err, out)
				}
				src = c
			}
			dst := filepath.Join(dir, tt.name+".raw")
			if err := ConvertQCOW2(src, dst); err != nil {
				t.Fatal(err)
			}
			run(t, "qemu-img", "compare", "-q", "-f", "raw", "-F", "qcow2", dst, src)
			fi, err := os.Stat(dst)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != 10240<<10 {
				t.Errorf("raw size %d, want %d", fi.Size(), 10240<<10)
			}
			size, err := QCOW2Size(src)
			if err != nil || size != 10240<<10 {
				t.Errorf("QCOW2Size = %d, %v; want %d", size, err, 10240<<10)
			}
		})
	}
}

func TestConvertQCOW2RefusesUnsafeImages(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.raw")
	if err := os.WriteFile(base, bytes.Repeat([]byte{1}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr error  // errors.Is target, or nil
		wantMsg string // substring
	}{
		{
			name:    "backing file",
			args:    []string{"create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", "IMG"},
			wantErr: ErrUnsafeImage, wantMsg: "backing file",
		},
		{
			name:    "external data file",
			args:    []string{"create", "-q", "-f", "qcow2", "-o", "data_file=" + filepath.Join(dir, "data.raw"), "IMG", "1M"},
			wantErr: ErrUnsafeImage, wantMsg: "external data file",
		},
		{
			name: "encrypted",
			args: []string{"create", "-q", "-f", "qcow2", "--object", "secret,id=sec0,data=pw",
				"-o", "encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=200", "IMG", "1M"},
			wantMsg: "encrypted",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := filepath.Join(dir, "img"+string(rune('a'+i))+".qcow2")
			args := append([]string(nil), tt.args...)
			for j := range args {
				if args[j] == "IMG" {
					args[j] = img
				}
			}
			// LUKS creation times its key derivation; on a loaded machine
			// qemu-img sometimes cannot measure it and fails, so retry.
			for try := 1; ; try++ {
				out, err := exec.Command("qemu-img", args...).CombinedOutput()
				if err == nil {
					break
				}
				if try == 3 {
					t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
				}
			}
			dst := filepath.Join(dir, tt.name+".raw")
			err := ConvertQCOW2(img, dst)
			if err == nil {
				t.Fatal("converted an image that must be refused")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v is not %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
			if _, err := os.Stat(dst); !os.IsNotExist(err) {
				t.Errorf("refused conversion left %s behind", dst)
			}
		})
	}
}

// A damaged image must give an error, never a panic or a hang.
func TestConvertQCOW2TruncatedOrGarbled(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	src := makeQCOW2(t, dir, "src.qcow2", "cluster_size=4096")
	good, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{0, 3, 50, 100, 4096, 8192, len(good) / 2, len(good) - 1} {
		p := filepath.Join(dir, "cut.qcow2")
		if err := os.WriteFile(p, good[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "cut.raw")
		os.Remove(dst)
		if err := ConvertQCOW2(p, dst); err == nil {
			t.Errorf("file cut to %d of %d bytes converted without error", cut, len(good))
		}
	}
	// Flip header fields one at a time.
	for _, off := range []int{4, 8, 20, 24, 32, 36, 40, 72, 100} {
		b := append([]byte(nil), good...)
		b[off] ^= 0xff
		p := filepath.Join(dir, "bad.qcow2")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "bad.raw")
		os.Remove(dst)
		_ = ConvertQCOW2(p, dst) // any outcome but a panic is fine
	}
}

// emptyQCOW2 writes a qcow2 v2 image of the given virtual size with
// nothing allocated: a header cluster, then the L1 table (64 KiB clusters).
func emptyQCOW2(t *testing.T, path string, size uint64) {
	t.Helper()
	const clusterBits = 16
	coverage := uint64(1) << (clusterBits + clusterBits - 3) // an L2 table's share of the disk
	l1 := (size + coverage - 1) / coverage
	b := make([]byte, 1<<clusterBits+l1*8)
	copy(b, "QFI\xfb")
	be := binary.BigEndian
	be.PutUint32(b[4:], 2)
	be.PutUint32(b[20:], clusterBits)
	be.PutUint64(b[24:], size)
	be.PutUint32(b[36:], uint32(l1))
	be.PutUint64(b[40:], 1<<clusterBits)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A virtual size no disk image needs is refused when the header is read.
func TestQCOW2VirtualSizeIsCapped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.qcow2")
	emptyQCOW2(t, p, 1<<50)
	if _, err := QCOW2Size(p); err == nil || !strings.Contains(err.Error(), "virtual size") {
		t.Fatalf("a 1 PiB virtual disk: %v, want it refused", err)
	}
}

// An image whose virtual size is more than the free space is refused
// before it is converted: its clusters may alias one another, so a small
// file can fill its whole virtual size.
func TestConvertQCOW2RefusesMoreThanTheFreeSpace(t *testing.T) {
	dir := t.TempDir()
	free, err := diskfree.Bytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	const size = 1 << 40
	if free >= size {
		t.Skipf("%d bytes free: a 1 TiB virtual disk fits", free)
	}
	src, dst := filepath.Join(dir, "big.qcow2"), filepath.Join(dir, "big.raw")
	emptyQCOW2(t, src, size)
	err = ConvertQCOW2(src, dst)
	if err == nil || !strings.Contains(err.Error(), "free") {
		t.Fatalf("a 1 TiB virtual disk with %d bytes free: %v, want it refused", free, err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("a refused conversion left %s", dst)
	}
	small := filepath.Join(dir, "small.qcow2")
	emptyQCOW2(t, small, 1<<20)
	if err := ConvertQCOW2(small, filepath.Join(dir, "small.raw")); err != nil {
		t.Errorf("a 1 MiB virtual disk: %v", err)
	}
}
