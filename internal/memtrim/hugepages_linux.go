package memtrim

import "golang.org/x/sys/unix"

// NoHugePages turns transparent huge pages off for this process. With THP
// on "always" (the Debian guest's setting) the kernel backs the Go heap
// with 2 MiB pages and folds released 4 KiB pages back into them, so a
// trimmed agent kept 5 huge pages (10 MiB) resident for 2.5 MiB of heap in
// use. An agent's heap is small and scattered; huge pages only cost it.
func NoHugePages() error {
	return unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0)
}
