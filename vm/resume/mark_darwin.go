package resume

import (
	"os"
	"syscall"
)

func fillStatMark(m *DiskMark, fi os.FileInfo) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		m.ChangeNs = st.Ctimespec.Nano()
		m.Inode = st.Ino
		m.Device = uint64(st.Dev)
	}
}
