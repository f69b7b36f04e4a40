package images

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"

	"github.com/vmdock/vmdock/internal/diskfree"
	"github.com/vmdock/vmdock/internal/sparsefile"
)

// A pure-Go qcow2 reader, just enough to turn an image into a raw disk:
// versions 2 and 3, L1/L2 tables, zero and unallocated clusters, deflate
// and zstd compressed clusters. It refuses what could make a disk read
// other files on the host (backing files, external data files — the
// CVE-2023-32684 class) and what it cannot decode (encryption, extended L2).
//
// Format reference: qemu docs/interop/qcow2.txt.

const (
	qcow2IncompatDirty      = 1 << 0 // refcounts may be stale; data is fine to read
	qcow2IncompatCorrupt    = 1 << 1
	qcow2IncompatDataFile   = 1 << 2
	qcow2IncompatCompress   = 1 << 3
	qcow2IncompatExtendedL2 = 1 << 4

	qcow2ExtEnd           = 0x00000000
	qcow2ExtDataFile      = 0x44415441
	qcow2ExtFullDiskCrypt = 0x0537be77

	qcow2OffsetMask     = 0x00fffffffffffe00 // host offset bits of L1 and standard L2 entries
	qcow2Compressed     = 1 << 62
	qcow2ZeroFlag       = 1 << 0
	qcow2MaxL1Bytes     = 32 << 20 // what qemu accepts; caps our allocation
	qcow2CompressDeflat = 0
	qcow2CompressZstd   = 1
	// qcow2MaxVirtualSize bounds a root disk image's virtual size, far
	// above any real one; ConvertQCOW2 also holds it to the free space.
	qcow2MaxVirtualSize = 2 << 40
)

// ErrUnsafeImage is wrapped by errors for qcow2 images that would make a
// disk read files other than the image itself.
var ErrUnsafeImage = errors.New("unsafe disk image")

// ErrEncryptedImage is wrapped by errors for encrypted qcow2 images, which
// vmdock cannot read.
var ErrEncryptedImage = errors.New("encrypted disk image")

type qcow2 struct {
	f           io.ReaderAt
	fileSize    int64
	version     uint32
	clusterBits uint32
	size        int64 // virtual disk size
	l1Size      uint32
	l1Offset    int64
	compression uint8

	flateR io.ReadCloser
	zstdR  *zstd.Decoder
}

// openQCOW2 reads and checks the header of a qcow2 file of fileSize bytes.
func openQCOW2(f io.ReaderAt, fileSize int64) (*qcow2, error) {
	hdr := make([]byte, 112)
	n, err := f.ReadAt(hdr, 0)
	if n < 72 {
		return nil, fmt.Errorf("qcow2 header: too short (%d bytes): %v", n, err)
	}
	be := binary.BigEndian
	if !bytes.Equal(hdr[:4], qcow2Magic) {
		return nil, errors.New("qcow2 header: bad magic")
	}
	q := &qcow2{f: f, fileSize: fileSize}
	q.version = be.Uint32(hdr[4:])
	backingOff := be.Uint64(hdr[8:])
	q.clusterBits = be.Uint32(hdr[20:])
	size := be.Uint64(hdr[24:])
	crypt := be.Uint32(hdr[32:])
	q.l1Size = be.Uint32(hdr[36:])
	l1Off := be.Uint64(hdr[40:])

	if q.version != 2 && q.version != 3 {
		return nil, fmt.Errorf("qcow2 version %d not supported (2, 3)", q.version)
	}
	if backingOff != 0 {
		return nil, fmt.Errorf("%w: qcow2 image has a backing file", ErrUnsafeImage)
	}
	if crypt != 0 {
		return nil, fmt.Errorf("%w: qcow2 image is encrypted (method %d), not supported", ErrEncryptedImage, crypt)
	}
	if q.clusterBits < 9 || q.clusterBits > 21 {
		return nil, fmt.Errorf("qcow2 cluster bits %d out of range (9..21)", q.clusterBits)
	}
	if size > qcow2MaxVirtualSize {
		return nil, fmt.Errorf("qcow2 virtual size %d too large (accepted: up to %d, 2 TiB)", size, uint64(qcow2MaxVirtualSize))
	}
	q.size = int64(size)

	extStart := int64(72)
	if q.version == 3 {
		if extStart, err = q.readV3Header(hdr, n); err != nil {
			return nil, err
		}
	}
	if err := q.checkExtensions(extStart); err != nil {
		return nil, err
	}
	if err := q.checkL1(l1Off); err != nil {
		return nil, err
	}
	q.l1Offset = int64(l1Off)
	return q, nil
}

// readV3Header reads the version 3 fields of hdr, of which n bytes were
// read, refusing the features unpacking cannot honour, and returns where
// the header extensions start.
func (q *qcow2) readV3Header(hdr []byte, n int) (int64, error) {
	be := binary.BigEndian
	if n < 104 {
		return 0, fmt.Errorf("qcow2 v3 header: too short (%d bytes)", n)
	}
	incompat := be.Uint64(hdr[72:])
	hdrLen := be.Uint32(hdr[100:])
	if hdrLen < 104 || int64(hdrLen) > q.clusterSize() {
		return 0, fmt.Errorf("qcow2 header length %d out of range", hdrLen)
	}
	if hdrLen > 104 && n > 104 {
		q.compression = hdr[104]
	}
	if incompat&qcow2IncompatDataFile != 0 {
		return 0, fmt.Errorf("%w: qcow2 image uses an external data file", ErrUnsafeImage)
	}
	if incompat&qcow2IncompatCorrupt != 0 {
		return 0, errors.New("qcow2 image is marked corrupt (repair it with qemu-img check -r all)")
	}
	if incompat&qcow2IncompatExtendedL2 != 0 {
		return 0, errors.New("qcow2 image uses extended L2 entries (subclusters), not supported")
	}
	if incompat&qcow2IncompatCompress == 0 {
		q.compression = qcow2CompressDeflat
	}
	if rest := incompat &^ (qcow2IncompatDirty | qcow2IncompatCompress); rest != 0 {
		return 0, fmt.Errorf("qcow2 image has unknown incompatible features %#x", rest)
	}
	if q.compression != qcow2CompressDeflat && q.compression != qcow2CompressZstd {
		return 0, fmt.Errorf("qcow2 compression type %d not supported (0 deflate, 1 zstd)", q.compression)
	}
	return int64(hdrLen), nil
}

// checkL1 checks that the L1 table at l1Off covers the whole disk and lies
// inside the file.
func (q *qcow2) checkL1(l1Off uint64) error {
	need := (q.size + q.l2Coverage() - 1) / q.l2Coverage()
	if int64(q.l1Size) < need {
		return fmt.Errorf("qcow2 L1 table has %d entries, the disk size needs %d", q.l1Size, need)
	}
	if int64(q.l1Size)*8 > qcow2MaxL1Bytes {
		return fmt.Errorf("qcow2 L1 table too large (%d entries)", q.l1Size)
	}
	if l1Off%uint64(q.clusterSize()) != 0 || l1Off > uint64(q.fileSize) || int64(l1Off)+need*8 > q.fileSize {
		return fmt.Errorf("qcow2 L1 table offset %d invalid for a %d-byte file", l1Off, q.fileSize)
	}
	return nil
}

func (q *qcow2) clusterSize() int64 { return 1 << q.clusterBits }
func (q *qcow2) l2Entries() int64   { return q.clusterSize() / 8 }
func (q *qcow2) l2Coverage() int64  { return q.l2Entries() * q.clusterSize() }

// checkExtensions walks the header extensions in the first cluster and
// refuses an external data file or full disk encryption.
func (q *qcow2) checkExtensions(off int64) error {
	end := min(q.clusterSize(), q.fileSize)
	b := make([]byte, 8)
	for off+8 <= end {
		if _, err := q.f.ReadAt(b, off); err != nil {
			return fmt.Errorf("qcow2 header extension at %d: %w", off, err)
		}
		typ, length := binary.BigEndian.Uint32(b), int64(binary.BigEndian.Uint32(b[4:]))
		switch typ {
		case qcow2ExtEnd:
			return nil
		case qcow2ExtDataFile:
			return fmt.Errorf("%w: qcow2 image names an external data file", ErrUnsafeImage)
		case qcow2ExtFullDiskCrypt:
			return fmt.Errorf("%w: qcow2 image is encrypted, not supported", ErrEncryptedImage)
		}
		off += 8 + (length+7)&^7
	}
	return nil
}

func (q *qcow2) readFull(b []byte, off int64, what string) error {
	if off < 0 || off+int64(len(b)) > q.fileSize {
		return fmt.Errorf("qcow2 %s at %d (+%d) lies outside the %d-byte file", what, off, len(b), q.fileSize)
	}
	n, err := q.f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	return fmt.Errorf("qcow2 %s at %d: %w", what, off, err)
}

// convert writes the virtual disk into the empty file dst, leaving
// unallocated and zero clusters as holes.
func (q *qcow2) convert(dst *os.File) error {
	be := binary.BigEndian
	cs := q.clusterSize()
	need := (q.size + q.l2Coverage() - 1) / q.l2Coverage()
	l1 := make([]byte, need*8)
	if err := q.readFull(l1, q.l1Offset, "L1 table"); err != nil {
		return err
	}
	l2 := make([]byte, cs)
	data := make([]byte, cs)
	for i := int64(0); i < need; i++ {
		l2Off := int64(be.Uint64(l1[i*8:]) & qcow2OffsetMask)
		if l2Off == 0 {
			continue // whole L2 range unallocated: zeros
		}
		if l2Off%cs != 0 {
			return fmt.Errorf("qcow2 L1 entry %d: L2 table offset %d not cluster aligned", i, l2Off)
		}
		if err := q.readFull(l2, l2Off, "L2 table"); err != nil {
			return err
		}
		for j := int64(0); j < q.l2Entries(); j++ {
			guest := (i*q.l2Entries() + j) * cs
			if guest >= q.size {
				break
			}
			n := min(cs, q.size-guest)
			e := be.Uint64(l2[j*8:])
			switch {
			case e&qcow2Compressed != 0:
				if err := q.readCompressed(e, data[:cs]); err != nil {
					return fmt.Errorf("qcow2 cluster at guest offset %d: %w", guest, err)
				}
			case q.version == 3 && e&qcow2ZeroFlag != 0:
				continue
			case e&qcow2OffsetMask == 0:
				continue // unallocated, and there is no backing file
			default:
				host := int64(e & qcow2OffsetMask)
				if host%cs != 0 {
					return fmt.Errorf("qcow2 cluster at guest offset %d: host offset %d not cluster aligned", guest, host)
				}
				if err := q.readFull(data[:n], host, "data cluster"); err != nil {
					return err
				}
			}
			if err := writeAtSparse(dst, data[:n], guest); err != nil {
				return fmt.Errorf("write %s: %w", dst.Name(), err)
			}
		}
	}
	if err := dst.Truncate(q.size); err != nil {
		return fmt.Errorf("write %s: %w", dst.Name(), err)
	}
	return nil
}

// readCompressed decodes one compressed cluster into out (one cluster;
// qemu pads a short last cluster with zeros before compressing it).
func (q *qcow2) readCompressed(e uint64, out []byte) error {
	x := 62 - (q.clusterBits - 8)
	host := int64(e & (1<<x - 1))
	sectors := int64((e >> x) & (1<<(62-x) - 1))
	// The entry gives an upper bound: whole 512-byte sectors from host's sector.
	csize := (sectors+1)*512 - host&511
	if host >= q.fileSize {
		return fmt.Errorf("compressed data offset %d beyond the %d-byte file", host, q.fileSize)
	}
	csize = min(csize, q.fileSize-host)
	buf := make([]byte, csize)
	if err := q.readFull(buf, host, "compressed cluster"); err != nil {
		return err
	}
	var r io.Reader
	switch q.compression {
	case qcow2CompressZstd:
		if q.zstdR == nil {
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			if err != nil {
				return err
			}
			q.zstdR = d
		}
		if err := q.zstdR.Reset(bytes.NewReader(buf)); err != nil {
			return err
		}
		r = q.zstdR
	default:
		if q.flateR == nil {
			q.flateR = flate.NewReader(bytes.NewReader(buf))
		} else if err := q.flateR.(flate.Resetter).Reset(bytes.NewReader(buf), nil); err != nil {
			return err
		}
		r = q.flateR
	}
	if _, err := io.ReadFull(r, out); err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	return nil
}

func (q *qcow2) close() {
	if q.zstdR != nil {
		q.zstdR.Close()
	}
}

// QCOW2Size returns the virtual disk size of a qcow2 image after checking
// that it is safe to read.
func QCOW2Size(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	q, err := openQCOW2(f, fi.Size())
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return q.size, nil
}

// ConvertQCOW2 writes the qcow2 image src as a sparse raw disk at dst,
// which must not exist yet.
func ConvertQCOW2(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("convert %s: %w", src, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("convert %s: %w", src, err)
	}
	q, err := openQCOW2(in, fi.Size())
	if err != nil {
		return fmt.Errorf("convert %s: %w", src, err)
	}
	defer q.close()
	// Clusters may alias one another, so a small file can fill its whole
	// virtual size: that must fit.
	free, err := diskfree.Bytes(filepath.Dir(dst))
	if err != nil {
		return fmt.Errorf("convert %s: %w", src, err)
	}
	if uint64(q.size) > free {
		return fmt.Errorf("convert %s: its virtual size %s is more than the %s free in %s",
			src, mib(q.size), mib(int64(min(free, math.MaxInt64))), filepath.Dir(dst))
	}
	if err := sparsefile.Create(dst, os.O_EXCL, 0o644, q.convert); err != nil {
		return fmt.Errorf("convert %s: %w", src, err)
	}
	return nil
}
