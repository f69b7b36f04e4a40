package hostagent

import "golang.org/x/sys/unix"

// softFileLimit caps the hard limit at the kernel's per-process ceiling: the
// hard limit is often RLIM_INFINITY, which setrlimit refuses for the soft
// limit.
func softFileLimit(hard uint64) uint64 {
	if perProc, err := unix.SysctlUint32("kern.maxfilesperproc"); err == nil && uint64(perProc) < hard {
		return uint64(perProc)
	}
	return hard
}
