package qemu

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

// CleanupOrphans ends a qemu or virtiofsd left running by an earlier host
// agent of the instance in dir, then removes its stale sockets and pid
// files. A pid counts as ours only while its command line still names a
// file in dir, so a recycled pid of an unrelated process is never killed.
func CleanupOrphans(dir string) error {
	dir = filepath.Clean(dir)
	var errs []error
	pidFiles, _ := filepath.Glob(filepath.Join(dir, driver.VirtiofsdPIDFiles))
	pidFiles = append([]string{PIDFilePath(dir)}, pidFiles...)
	for _, pf := range pidFiles {
		if err := killFromPIDFile(pf, dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(pf); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("remove stale pid file: %w", err))
		}
	}
	if len(errs) == 0 {
		removeSockets(dir)
	}
	return errors.Join(errs...)
}

// removeSockets deletes the unix sockets qemu and virtiofsd listen on; a
// socket left by a killed process would make the next connect fail with
// "connection refused" instead of waiting for the new listener.
func removeSockets(dir string) {
	socks, _ := filepath.Glob(filepath.Join(dir, driver.VirtiofsSocketFiles))
	socks = append(socks, QMPSocketPath(dir), AgentSocketPath(dir))
	for _, s := range socks {
		if err := os.Remove(s); err != nil && !os.IsNotExist(err) {
			slog.Warn("remove stale socket", "path", s, "err", err)
		}
	}
}

func killFromPIDFile(pidFile, dir string) error {
	b, err := os.ReadFile(pidFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		slog.Warn("ignore garbage pid file", "path", pidFile, "content", strings.TrimSpace(string(b)))
		return nil
	}
	ours := func() (bool, error) {
		cmd, err := processCmdline(pid)
		if err != nil {
			return false, err
		}
		return strings.Contains(cmd, dir+string(filepath.Separator)) &&
			(strings.Contains(cmd, "qemu-system") || strings.Contains(cmd, "virtiofsd")), nil
	}
	alive, err := ours()
	if err != nil || !alive {
		return err
	}
	slog.Info("killing orphaned VM process", "pid", pid, "pidfile", pidFile)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill orphan pid %d from %s: %w", pid, pidFile, err)
	}
	// The orphan's parent (init, or a test) reaps it; wait until it is
	// gone so its sockets and disk locks are released before a new start.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if alive, err := ours(); err == nil && !alive {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("orphan pid %d from %s still running 5s after SIGKILL", pid, pidFile)
}
