//go:build !linux

package memtrim

// dropColdCode has nothing to do where madvise(MADV_PAGEOUT) does not
// exist (macOS): the kernel ages the binary's clean pages out by itself.
func dropColdCode() error { return nil }
