package main

import (
	"bytes"
	"fmt"
	"io"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchInotify prints "<name> <mask>" for each inotify event in dir, the
// way a file watcher in a container learns about changes.
func watchInotify(dir string, out io.Writer) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	defer unix.Close(fd)
	mask := uint32(unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE)
	if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	fmt.Fprintf(out, "watching %s\n", dir)
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			return fmt.Errorf("read inotify: %w", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			fmt.Fprintf(out, "%s 0x%x\n", bytes.TrimRight(name, "\x00"), ev.Mask)
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}
