package logfile

import "golang.org/x/sys/unix"

// dupTo makes newfd refer to oldfd's file; Linux arm64 has only dup3.
func dupTo(oldfd, newfd int) error { return unix.Dup3(oldfd, newfd, 0) }
