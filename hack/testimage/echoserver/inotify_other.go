//go:build !linux

package main

import (
	"errors"
	"io"
)

func watchInotify(string, io.Writer) error { return errors.New("-inotify needs Linux") }
