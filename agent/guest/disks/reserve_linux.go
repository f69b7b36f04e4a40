package disks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The data disk keeps a small reserve file that the agent gives back when
// the disk is full: dockerd writes its state there while it starts, so on
// a disk a container filled it would not start, and the user could not run
// the docker commands that free the space. The next boot with room again
// takes the reserve back.
const reserveName = ".vmdock-reserve"

var reserveSize int64 = 64 << 20

// diskFree is the bytes root may still write on the file system at path
// (root's reserved blocks included: dockerd runs as root).
var diskFree = func(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bfree) * int64(st.Bsize), nil
}

func (s *Disks) reservePath() string { return s.Path(filepath.Join(DataMount, reserveName)) }

// keepReserve creates the reserve when it is missing and the disk has
// plenty of room.
func (s *Disks) keepReserve() error {
	p := s.reservePath()
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	free, err := diskFree(filepath.Dir(p))
	if err != nil {
		return fmt.Errorf("data disk reserve: %w", err)
	}
	if free < 4*reserveSize {
		return nil // not now: a full disk needs every byte
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("data disk reserve: %w", err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, reserveSize); err != nil {
		os.Remove(p)
		return fmt.Errorf("data disk reserve: %w", err)
	}
	return nil
}

// ReleaseReserveIfFull removes the reserve when less than its size is free.
func (s *Disks) ReleaseReserveIfFull() (bool, error) {
	p := s.reservePath()
	free, err := diskFree(filepath.Dir(p))
	if err != nil || free >= reserveSize {
		return false, err
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	s.Log.Warn("the data disk is full: released its reserve so docker can start; free space with docker rm / docker system prune", "released", reserveSize)
	return true, nil
}
