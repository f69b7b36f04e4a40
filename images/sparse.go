package images

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// sparseBlock is the unit checked for zeros: small enough to find holes in
// a freshly made ext4 image, large enough to keep syscalls few.
const sparseBlock = 64 << 10

var zeroBlock = make([]byte, sparseBlock)

func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroBlock))
		if !bytes.Equal(b[:n], zeroBlock[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// writeSparse copies r into the empty file f, leaving holes where r has
// whole zero blocks, and returns the bytes copied.
func writeSparse(f *os.File, r io.Reader) (int64, error) {
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, rerr := io.ReadFull(r, buf)
		if err := writeAtSparse(f, buf[:n], off); err != nil {
			return off, err
		}
		off += int64(n)
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return off, rerr
		}
	}
	// Truncate sets the size when the data ends in a hole.
	if err := f.Truncate(off); err != nil {
		return off, err
	}
	return off, nil
}

// writeAtSparse writes b at off, skipping zero blocks (the file already
// reads as zeros there).
func writeAtSparse(f *os.File, b []byte, off int64) error {
	for len(b) > 0 {
		n := min(len(b), sparseBlock)
		if !isZero(b[:n]) {
			if _, err := f.WriteAt(b[:n], off); err != nil {
				return err
			}
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// copySparse copies src into the empty file dst, reading only src's data
// regions and writing only non-zero blocks, and gives dst src's size.
func copySparse(dst, src *os.File) error {
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	regions, err := dataRegions(src, size)
	if err != nil {
		regions = []region{{0, size}} // no SEEK_DATA here: read it all
	}
	buf := make([]byte, 1<<20)
	for _, r := range regions {
		for off := r.start; off < r.end; {
			n := int(min(int64(len(buf)), r.end-off))
			m, err := src.ReadAt(buf[:n], off)
			if err != nil && !(errors.Is(err, io.EOF) && m == n) {
				return fmt.Errorf("read %s at %d: %w", src.Name(), off, err)
			}
			if err := writeAtSparse(dst, buf[:m], off); err != nil {
				return fmt.Errorf("write %s at %d: %w", dst.Name(), off, err)
			}
			off += int64(m)
		}
	}
	return dst.Truncate(size)
}

type region struct{ start, end int64 }
