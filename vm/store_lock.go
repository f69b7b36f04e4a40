package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Lock is a held instance lock; Unlock releases it.
type Lock struct {
	path string
}

// held counts this process's holds per lock file, so code further down the
// same command (vm.Start after the CLI locked) may Lock again: flock locks
// belong to open files, and a second open in one process would conflict.
var (
	heldMu sync.Mutex
	held   = map[string]*heldLock{}
)

type heldLock struct {
	f     *os.File
	count int
}

// ErrLocked is wrapped by Lock's error when another process holds the lock.
var ErrLocked = errors.New("instance is locked")

// Lock takes the instance's exclusive lock without waiting. When another
// process holds it, the error names that process's pid. The instance
// folder must exist (Create).
func (i *Instance) Lock() (*Lock, error) {
	path := i.LockPath()
	heldMu.Lock()
	defer heldMu.Unlock()
	if h := held[path]; h != nil {
		h.count++
		return &Lock{path: path}, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock profile %s: %w", i.Name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another process"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
					holder = "pid " + strconv.Itoa(pid)
				}
			}
			return nil, i.busy(holder, path)
		}
		return nil, fmt.Errorf("lock profile %s: %w", i.Name, err)
	}
	// The pid goes in only after the lock is ours, so a waiter never reads
	// a pid that does not hold it.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	held[path] = &heldLock{f: f, count: 1}
	return &Lock{path: path}, nil
}

// Unlock releases one hold; the file lock goes with the last one.
func (l *Lock) Unlock() error {
	if l == nil || l.path == "" {
		return nil
	}
	heldMu.Lock()
	defer heldMu.Unlock()
	path := l.path
	l.path = ""
	h := held[path]
	if h == nil {
		return nil
	}
	if h.count--; h.count > 0 {
		return nil
	}
	delete(held, path)
	_ = h.f.Truncate(0)
	if err := h.f.Close(); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// busy explains a held lock. The common case is a `vmdock start` that holds
// it for the whole boot: say that the instance is starting and how to
// watch it, rather than only that something holds a file.
func (i *Instance) busy(holder, path string) error {
	if st := i.Status(context.Background()); st.State == StateStarting {
		step := ""
		if st.HostAgent != nil && st.HostAgent.Step != "" {
			step = ", step " + st.HostAgent.Step
		}
		return fmt.Errorf("instance %q is still starting (host agent pid %d%s; %s holds the profile lock); wait for it or run `vmdock status -p %s`: %w", i.Name, st.PID, step, holder, i.Name, ErrLocked)
	}
	return fmt.Errorf("profile %s is busy: %s holds %s (another vmdock command is running): %w", i.Name, holder, path, ErrLocked)
}
