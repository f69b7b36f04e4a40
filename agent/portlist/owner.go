package portlist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// OwnedBy lists the forwardable sockets held open by the processes named
// in comms that share proc/self's mount namespace: the guest's own
// daemons, not a container's process of the same name. Sockets are matched
// by inode between the processes' fd tables and netDir's tcp, tcp6, udp
// and udp6 tables. proc is /proc in the guest, netDir /proc/net; tests
// pass their own. A process that ends while it is read is skipped.
func OwnedBy(proc, netDir string, comms []string) ([]Port, error) {
	self, err := os.Readlink(filepath.Join(proc, "self", "ns", "mnt"))
	if err != nil {
		return nil, fmt.Errorf("own mount namespace: %w", err)
	}
	inodes, err := socketInodes(proc, self, comms)
	if err != nil || len(inodes) == 0 {
		return nil, err
	}
	var out []Port
	for _, f := range []struct{ file, proto string }{{"tcp", "tcp"}, {"tcp6", "tcp"}, {"udp", "udp"}, {"udp6", "udp"}} {
		fh, err := os.Open(filepath.Join(netDir, f.file))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = scanProcNet(fh, f.proto, func(p Port, inode uint64) {
			if inodes[inode] {
				out = append(out, p)
			}
		})
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(netDir, f.file), err)
		}
	}
	sortPorts(out)
	return out, nil
}

// socketInodes are the sockets open in the named processes of mount
// namespace mntNS.
func socketInodes(proc, mntNS string, comms []string) (map[uint64]bool, error) {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	inodes := map[uint64]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := filepath.Join(proc, e.Name())
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || !slices.Contains(comms, strings.TrimSpace(string(comm))) {
			continue
		}
		if ns, err := os.Readlink(filepath.Join(dir, "ns", "mnt")); err != nil || ns != mntNS {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(dir, "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
			if err != nil {
				continue
			}
			if n, ok := strings.CutPrefix(target, "socket:["); ok {
				if inode, err := strconv.ParseUint(strings.TrimSuffix(n, "]"), 10, 64); err == nil {
					inodes[inode] = true
				}
			}
		}
	}
	return inodes, nil
}
