//go:build linux || darwin

package images

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// dataRegions lists the parts of f that hold data, by SEEK_DATA/SEEK_HOLE,
// so a mostly empty disk is copied without reading its holes.
func dataRegions(f *os.File, size int64) ([]region, error) {
	var out []region
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if err != nil {
			return nil, err
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		end = min(end, size)
		out = append(out, region{start, end})
		off = end
	}
	return out, nil
}
