//go:build linux || darwin

package sparsefile

import (
	"os"
	"syscall"
)

// Allocated is the space fi's file takes on its disk (st_blocks, in
// 512-byte units on Linux and macOS alike), which is less than its size
// while it has holes; ok is false when fi carries no stat.
func Allocated(fi os.FileInfo) (bytes int64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Blocks * 512, true
}
