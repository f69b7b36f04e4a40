// Package logfile caps vmdock's log files: each one grows to MaxSize, then
// moves to <name>.1 (replacing the older copy) and starts again empty, so an
// instance that runs for months keeps at most two files of each log.
package logfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"
)

// MaxSize is the cap of every log file vmdock writes.
const MaxSize = 10 << 20

// OldSuffix names the one older copy kept.
const OldSuffix = ".1"

// Rotate moves path to path.1 when it holds max bytes or more. A missing
// file needs nothing.
func Rotate(path string, max int64) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	if fi.Size() < max {
		return nil
	}
	if err := os.Rename(path, path+OldSuffix); err != nil {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	return nil
}

// Writer appends to a log file and rotates it before a write would take
// it past its cap. Safe for concurrent use.
type Writer struct {
	path string
	max  int64

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open appends to path (mode 0600), rotating it first if it is already at
// the cap.
func Open(path string, max int64) (*Writer, error) {
	w := &Writer{path: path, max: max}
	if err := w.reopen(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Writer) reopen() error {
	if err := Rotate(w.path, w.max); err != nil {
		return err
	}
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log %s: %w", w.path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open log %s: %w", w.path, err)
	}
	w.f, w.size = f, fi.Size()
	return nil
}

// Write appends p; a write that would pass the cap first moves the full
// file to .1. One write larger than the cap still goes in whole, so no
// line is ever split across the two files.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return 0, fs.ErrClosed
	}
	if w.size > 0 && w.size+int64(len(p)) > w.max {
		w.f.Close()
		w.f = nil
		// A failed rename leaves the file where it is: the log goes on
		// growing rather than stopping.
		renameErr := os.Rename(w.path, w.path+OldSuffix)
		if err := w.reopen(); err != nil {
			return 0, errors.Join(renameErr, err)
		}
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	return n, err
}

// Close closes the current file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// StderrRotator caps a log file that is this process's stdout and stderr
// (the host agent's: `vmdock start` opens it for the child). Everything
// the process prints goes there, slog and panics alike, so instead of
// wrapping one writer it checks the file's size every interval and, past
// the cap, moves it to .1 and points fds 1 and 2 at a fresh file.
//
// It does nothing (and returns false) unless stderr really is path: a host
// agent run in the foreground logs to the terminal.
func StderrRotator(path string, max int64, every time.Duration, stop <-chan struct{}) bool {
	if !stderrIs(path) {
		return false
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if err := rotateStderr(path, max); err != nil {
				fmt.Fprintf(os.Stderr, "log rotation: %v\n", err)
			}
		}
	}()
	return true
}

func stderrIs(path string) bool {
	a, err := os.Stderr.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// rotateStderr moves the log away when stderr's file passed max and
// redirects stdout and stderr to a new file at path.
func rotateStderr(path string, max int64) error {
	fi, err := os.Stderr.Stat()
	if err != nil || fi.Size() < max {
		return err
	}
	if !stderrIs(path) {
		return nil // someone moved it already; keep writing where we are
	}
	if err := os.Rename(path, path+OldSuffix); err != nil {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log %s: %w", path, err)
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := dupTo(int(f.Fd()), fd); err != nil {
			return fmt.Errorf("redirect fd %d to %s: %w", fd, path, err)
		}
	}
	return nil
}
