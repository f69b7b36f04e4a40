package images

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/internal/sparsefile"
)

// cloneFile makes dst a copy-on-write clone of src (FICLONE: btrfs, XFS).
func cloneFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return sparsefile.Create(dst, os.O_EXCL, 0o600, func(out *os.File) error {
		return unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
	})
}
