package resume

import (
	"os"
	"syscall"
)

func fillStatMark(m *DiskMark, fi os.FileInfo) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		m.ChangeNs = st.Ctim.Nano()
		m.Inode = st.Ino
		m.Device = uint64(st.Dev) //nolint:unconvert // Dev is uint64 on most, but not all, Linux arches
	}
}
