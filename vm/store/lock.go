package store

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Lock is a held instance lock; Unlock releases it. A command takes it
// once, at its top, and holds it to the end: nothing below a command locks
// again, so the lock is not re-entrant (a second Lock in the same process
// is refused like any other holder's).
type Lock struct {
	f *os.File
}

// ErrLocked is wrapped by Lock's error when another process holds the lock.
var ErrLocked = errors.New("instance is locked")

// Lock takes the instance's exclusive lock without waiting. When another
// process holds it, the error names that process's pid. The instance
// folder must exist (Create).
func (i *Instance) Lock() (*Lock, error) {
	path := i.LockPath()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock profile %s: %w", i.Name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &BusyError{Profile: i.Name, Holder: lockHolder(path), Path: path}
		}
		return nil, fmt.Errorf("lock profile %s: %w", i.Name, err)
	}
	// The pid goes in only after the lock is ours, so a waiter never reads
	// a pid that does not hold it.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock; a second Unlock does nothing.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	_ = f.Truncate(0)
	if err := f.Close(); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// lockHolder names the process holding the lock at path. The holder
// writes its pid just after it took the lock, so a file still empty is
// read again for a moment: two commands started together would otherwise
// see the winner's lock before its pid.
func lockHolder(path string) string {
	for try := 0; try < 40; try++ {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return "pid " + strconv.Itoa(pid)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "another process"
}

// BusyError is Lock's error when another process holds the lock; it
// wraps ErrLocked. Holder names that process ("pid 123"). Package
// instance adds what the holder is doing when the instance is starting.
type BusyError struct {
	Profile string
	Holder  string
	Path    string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("profile %s is busy: %s holds %s (another vmdock command is running): %v", e.Profile, e.Holder, e.Path, ErrLocked)
}

func (e *BusyError) Unwrap() error { return ErrLocked }
