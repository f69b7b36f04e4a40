package images

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/vmdock/vmdock/internal/atomicfile"

	"github.com/klauspost/compress/zstd"
)

// Manifest describes a vmdock image; it is manifest.json in the archive.
type Manifest struct {
	Arch      string            `json:"arch"`
	Cmdline   string            `json:"cmdline"`  // kernel command line
	Files     map[string]string `json:"files"`    // file name -> sha256 (hex, "sha256:" prefix optional)
	Packages  map[string]string `json:"packages"` // Debian package -> version
	BuildTime string            `json:"buildTime"`
}

// imageFiles are the files a vmdock archive must carry besides the manifest.
var imageFiles = []string{"disk.raw", "vmlinuz", "initrd.img"}

const (
	manifestName = "manifest.json"
	verifiedName = ".verified" // sizes of the verified files, written last
)

// unpacked returns the manifest of the image unpacked in dir, unpacking
// blob there first unless an earlier unpack finished and its files still
// have the sizes it recorded.
func (c *Cache) unpacked(blob, dir string) (*Manifest, error) {
	if m, err := checkUnpacked(dir); err == nil {
		return m, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		slog.Warn("unpacked image is damaged; unpacking it again", "dir", dir, "err", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("unpack image: %w", err)
	}
	defer os.RemoveAll(tmp)
	m, err := unpackArchive(blob, tmp)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.SwapDir(tmp, dir); err != nil {
		return nil, fmt.Errorf("unpack image: %w", err)
	}
	return m, nil
}

func checkUnpacked(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, verifiedName))
	if err != nil {
		return nil, err
	}
	var sizes map[string]int64
	if err := json.Unmarshal(b, &sizes); err != nil {
		return nil, fmt.Errorf("%s: %w", verifiedName, err)
	}
	for name, size := range sizes {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, errors.Unwrap(err))
		}
		if fi.Size() != size {
			return nil, fmt.Errorf("%s: size %d, want %d", name, fi.Size(), size)
		}
	}
	return readManifest(filepath.Join(dir, manifestName))
}

func readManifest(p string) (*Manifest, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(b)
	if err != nil {
		return nil, fmt.Errorf("image manifest %s: %w", p, err)
	}
	return m, nil
}

func parseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// unpackArchive unpacks the vmdock .tar.zst blob into dir; see unpackVMDock.
func unpackArchive(blob, dir string) (*Manifest, error) {
	f, err := os.Open(blob)
	if err != nil {
		return nil, fmt.Errorf("unpack image: %w", err)
	}
	defer f.Close()
	m, err := unpackVMDock(f, dir, imageLimits)
	if err != nil {
		return nil, fmt.Errorf("unpack image %s: %w", blob, err)
	}
	return m, nil
}

// unpackLimits caps what an archive can make the unpack decompress, write
// and hold in memory, so a hostile or broken file is refused early instead
// of filling the disk or the memory.
type unpackLimits struct {
	manifest, kernel, initrd, disk int64
	zstdWindow                     uint64 // zstd window and decoder memory
}

// imageLimits leave room to grow: build.sh makes a 4 GiB disk.raw, a
// kernel and an initrd of a few tens of MiB, and compresses with zstd -10
// (a 4 MiB window); 128 MiB still takes --long=27.
var imageLimits = unpackLimits{manifest: 1 << 20, kernel: 256 << 20, initrd: 256 << 20, disk: 64 << 30, zstdWindow: 128 << 20}

func (l unpackLimits) of(name string) (int64, string) {
	switch name {
	case manifestName:
		return l.manifest, "a manifest"
	case "vmlinuz":
		return l.kernel, "a kernel"
	case "initrd.img":
		return l.initrd, "an initrd"
	}
	return l.disk, "a disk"
}

// headerBudget bounds what tar reads between two members: the headers,
// PAX records, long names and padding of one member take a few KiB, and
// archive/tar would otherwise read any number of PAX headers in a row.
const headerBudget = 4 << 20

// vmdockLayout is what a vmdock archive holds, for refusals.
const vmdockLayout = "a zstd-compressed tar of manifest.json, disk.raw, vmlinuz and initrd.img, as hack/image/build.sh writes"

// notVMDockError is a file that is no vmdock image, as opposed to a
// failure to write its files out.
type notVMDockError struct{ err error }

func (e *notVMDockError) Error() string {
	return "not a vmdock image (" + e.err.Error() + "; accepted: " + vmdockLayout + ")"
}

func (e *notVMDockError) Unwrap() error { return e.err }

func notVMDock(format string, args ...any) error {
	return &notVMDockError{fmt.Errorf(format, args...)}
}

// unpackVMDock unpacks a vmdock .tar.zst read from r into dir and checks
// every file against the manifest, within lim: a member's size is checked
// from its header, before its data is read. disk.raw is written sparse:
// its zero blocks become holes, so a 4 GiB disk takes only the space its
// data needs. A .verified file, written last, marks a complete unpack.
func unpackVMDock(r io.Reader, dir string, lim unpackLimits) (*Manifest, error) {
	zr, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(lim.zstdWindow), zstd.WithDecoderMaxMemory(lim.zstdWindow))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	defer zr.Close()
	budget := &budgetReader{r: zr}
	tr := tar.NewReader(budget)
	data := archiveReader{tr}

	sums := map[string]string{}
	sizes := map[string]int64{}
	sawRoot := false
	for {
		budget.set(headerBudget, errLongHeaders)
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &notVMDockError{lim.readProblem(err)}
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if hdr.Typeflag == tar.TypeDir && name == "." && !sawRoot {
			sawRoot = true
			continue
		}
		if !isImageMember(name) {
			return nil, notVMDock("unexpected member %q", hdr.Name)
		}
		// archive/tar expands the holes of sparse members (build.sh uses GNU
		// tar --sparse) but keeps the old-GNU 'S' type flag; their Size is
		// the expanded one.
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeGNUSparse {
			return nil, notVMDock("member %q is not a regular file", hdr.Name)
		}
		if max, what := lim.of(name); hdr.Size > max || hdr.Size < 0 {
			return nil, notVMDock("member %q claims %s, more than the %s %s may have", name, humanSize(hdr.Size), humanSize(max), what)
		}
		if _, dup := sums[name]; dup {
			return nil, notVMDock("member %q appears twice", name)
		}
		budget.set(hdr.Size, errLongData)
		sum, n, err := unpackMember(data, dir, name, lim)
		if err != nil {
			return nil, err
		}
		sums[name] = sum
		sizes[name] = n
	}

	m, err := checkManifest(dir, sums)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(sizes)
	if err := os.WriteFile(filepath.Join(dir, verifiedName), b, 0o644); err != nil {
		return nil, err
	}
	return m, nil
}

// unpackMember writes the member data holds to dir/name, sparse, and
// returns its SHA-256 and size.
func unpackMember(data archiveReader, dir, name string, lim unpackLimits) (string, int64, error) {
	out, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := writeSparse(out, io.TeeReader(data, h))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	var bad *archiveError
	if errors.As(err, &bad) {
		return "", 0, notVMDock("%s: %v", name, lim.readProblem(bad.err))
	}
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// checkManifest reads the manifest unpacked into dir and checks the
// members' sums against it.
func checkManifest(dir string, sums map[string]string) (*Manifest, error) {
	if _, ok := sums[manifestName]; !ok {
		return nil, notVMDock("no %s in the archive", manifestName)
	}
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(b)
	if err != nil {
		return nil, notVMDock("%s: %v", manifestName, err)
	}
	if err := m.check(sums); err != nil {
		return nil, &notVMDockError{err}
	}
	return m, nil
}

// budgetReader fails once it has given left bytes, so tar cannot read
// more than the member sizes it was told, nor spin through header after
// header of a stream that decompresses without end.
type budgetReader struct {
	r    io.Reader
	left int64
	over error // what running out means
}

var (
	errLongHeaders = fmt.Errorf("tar headers of one member run past %s", humanSize(headerBudget))
	errLongData    = errors.New("a member has more data than its tar header says")
)

func (b *budgetReader) set(n int64, over error) { b.left, b.over = n, over }

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, b.over
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &zstdError{err}
	}
	return n, err
}

// zstdError is a failure to decompress, told apart from tar's.
type zstdError struct{ err error }

func (e *zstdError) Error() string { return "zstd: " + e.err.Error() }
func (e *zstdError) Unwrap() error { return e.err }

// readProblem says what an error reading the archive means.
func (l unpackLimits) readProblem(err error) error {
	var z *zstdError
	switch {
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return fmt.Errorf("a zstd window larger than the %s accepted", humanSize(int64(l.zstdWindow)))
	case errors.Is(err, errLongHeaders), errors.Is(err, errLongData):
		return err
	case errors.As(err, &z) && errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the zstd stream is cut short")
	case errors.As(err, &z):
		return err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the tar archive inside the zstd stream is cut short")
	}
	return fmt.Errorf("no tar archive inside the zstd stream: %w", err)
}

// archiveReader marks the errors of reading a member as the archive's
// fault. The mark does not unwrap: a member cut short (tar's
// io.ErrUnexpectedEOF) must not look like the normal end of the data.
type archiveReader struct{ r io.Reader }

type archiveError struct{ err error }

func (e *archiveError) Error() string { return e.err.Error() }

func (a archiveReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &archiveError{err}
	}
	return n, err
}

// humanSize writes a byte count the way limits are stated.
func humanSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func isImageMember(name string) bool {
	if name == manifestName {
		return true
	}
	for _, f := range imageFiles {
		if name == f {
			return true
		}
	}
	return false
}

// check verifies the unpacked files' sha256 sums against the manifest.
func (m *Manifest) check(sums map[string]string) error {
	if err := checkArch(m.Arch); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	for _, name := range imageFiles {
		want, ok := m.Files[name]
		if !ok {
			return fmt.Errorf("manifest lists no digest for %s", name)
		}
		got, ok := sums[name]
		if !ok {
			return fmt.Errorf("archive has no %s", name)
		}
		want = strings.ToLower(strings.TrimPrefix(want, "sha256:"))
		if got != want {
			return fmt.Errorf("%s: %w: manifest says sha256:%s, file is sha256:%s", name, ErrDigestMismatch, want, got)
		}
	}
	return nil
}
