package qemu

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

var _ driver.CostReporter = (*Machine)(nil)

// CPUTime is qemu's user plus system CPU time so far.
func (m *Machine) CPUTime() (time.Duration, error) {
	pid, err := m.livePID()
	if err != nil {
		return 0, err
	}
	t, err := readCPUTime(pid)
	if err != nil {
		return 0, fmt.Errorf("qemu: CPU time of pid %d: %w", pid, err)
	}
	return t, nil
}

// Memory reads qemu's mappings: the process's resident memory, and the
// guest RAM's part of it. The RAM block is the mapping of exactly the
// configured memory size: the memfd of memory-backend-memfd with virtiofs
// (see memoryArgs), else QEMU's anonymous RAM block, whose guard page is a
// mapping of its own.
func (m *Machine) Memory() (driver.MemoryUse, error) {
	pid, err := m.livePID()
	if err != nil {
		return driver.MemoryUse{}, err
	}
	maps, err := readSmaps(pid)
	if err != nil {
		return driver.MemoryUse{}, fmt.Errorf("qemu: mappings of pid %d: %w", pid, err)
	}
	var use driver.MemoryUse
	for _, mp := range maps {
		use.Resident += mp.rss
	}
	if ram, ok := guestRAM(maps, int64(m.spec.MemoryMiB)<<20); ok {
		use.GuestRAMResident = ram.rss
	}
	return use, nil
}

// livePID is qemu's pid while it runs: once reaped, the pid may be
// another process's.
func (m *Machine) livePID() (int, error) {
	if m.cmd == nil || m.cmd.Process == nil {
		return 0, errors.New("qemu: the VM is not running")
	}
	select {
	case <-m.qemuGone:
		return 0, errors.New("qemu: the VM is not running")
	default:
	}
	return m.cmd.Process.Pid, nil
}

// mapping is one entry of /proc/<pid>/smaps, in bytes.
type mapping struct {
	size int64 // from the address range
	rss  int64
}

// parseSmaps reads the address range and the Rss line of every mapping.
func parseSmaps(r io.Reader) ([]mapping, error) {
	var maps []mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") { // a mapping's header: start-end perms offset dev inode [path]
			lo, hi, ok := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || end < start {
				return nil, fmt.Errorf("smaps: unexpected line %q", sc.Text())
			}
			maps = append(maps, mapping{size: int64(end - start)})
			continue
		}
		if f[0] != "Rss:" || len(maps) == 0 {
			continue
		}
		if len(f) != 3 || f[2] != "kB" {
			return nil, fmt.Errorf("smaps: unexpected line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("smaps: unexpected line %q", sc.Text())
		}
		maps[len(maps)-1].rss = kb << 10
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	return maps, nil
}

// guestRAM is the mapping of exactly size bytes; of several, the most
// resident one, since the guest's RAM is what the guest touched.
func guestRAM(maps []mapping, size int64) (mapping, bool) {
	var best mapping
	found := false
	for _, mp := range maps {
		if mp.size == size && (!found || mp.rss > best.rss) {
			best, found = mp, true
		}
	}
	return best, found
}
