//go:build !linux

package probe

import "os"

// fdatasync is fsync where the OS has no fdatasync (macOS): the workload
// runs in the Linux guest; this keeps the package building on the host.
func fdatasync(f *os.File) error { return f.Sync() }
