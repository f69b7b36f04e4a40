package probe

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync flushes the data of f (and the size it needs to read it back),
// not the other metadata: what databases call on their logs.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
