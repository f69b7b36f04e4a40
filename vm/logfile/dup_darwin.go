package logfile

import "golang.org/x/sys/unix"

// dupTo makes newfd refer to oldfd's file.
func dupTo(oldfd, newfd int) error { return unix.Dup2(oldfd, newfd) }
