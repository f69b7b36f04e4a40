package disks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmdock/vmdock/internal/fsutil"
	"golang.org/x/sys/unix"
)

// Upkeep gives the host back what an idle guest does not need:
// memory the guest only keeps as cold page cache, and disk blocks its file
// systems freed. Every UpkeepEvery the agent
//
//   - reads the memory pressure (PSI) and, when the guest had none since
//     the last look, asks the kernel through cgroup v2's memory.reclaim to
//     drop part of the inactive page cache. Freed pages go back to the
//     host through the balloon's free page reporting (QEMU); nothing is
//     dropped wholesale (no drop_caches), nothing active, and never while
//     something waits for memory.
//   - runs fstrim on the root and data file systems when they freed about
//     trimGrowth since the last trim (an image, volume or container
//     removed; see freedSinceTrim) and once every trimEvery otherwise, so
//     the blocks a delete freed are punched out of the host's disk files
//     (the drives pass discard=unmap). The data disk is mounted without
//     online discard; fstrim also covers the root's discards that did not
//     reach the disk.
const (
	UpkeepEvery = 30 * time.Second

	// psiQuiet is how much of one upkeep interval tasks may have stalled
	// on memory (PSI's "some" total, µs) for it to count as no pressure:
	// 1 %, as for the last 10 s (avg10, in percent). An idle guest under
	// TCG measured a few ms a second of such stalls with 1.2 GiB free.
	psiQuiet = uint64(UpkeepEvery / 100 / time.Microsecond)

	// A cgroup's inactive file cache below reclaimMin is left alone; above
	// it, one round reclaims half of it, at most reclaimMax. Half of the
	// inactive list each quiet round: a cache that stays cold goes in a
	// few minutes, one in use comes back to the active list first.
	reclaimMin = 32 << 20
	reclaimMax = 128 << 20

	trimEvery  = time.Hour
	trimGrowth = 128 << 20
	// trimGap spaces trims that free-space growth triggers.
	trimGap     = time.Minute
	trimTimeout = 10 * time.Minute

	cgroupRoot = "/sys/fs/cgroup"
	psiMemory  = "/proc/pressure/memory"
)

// upkeep is the state of the periodic work; its decisions are pure
// functions of what it read, for the tests.
type upkeep struct {
	s *Disks

	psiTotal uint64 // memory "some total" at the last look
	psiSeen  bool

	trims map[string]*trimState // by mount point
	// noReclaim: memory.reclaim is absent or refused; said once.
	noReclaim bool
	// statFree is the file system's free bytes; syncFS commits its
	// journal so the blocks a delete freed are free for fstrim too.
	statFree func(path string) (uint64, error)
	syncFS   func(path string) error
}

type trimState struct {
	last    time.Time
	lowFree uint64 // the least free space seen since the last trim
	// At the last trim (or the first look): the free space and the bytes
	// the file system had written to its disk, when ext4 says
	// (lifetime_write_kbytes).
	seen          bool
	freeAtTrim    uint64
	writtenAtTrim uint64
	haveWritten   bool
}

func newUpkeep(s *Disks, now time.Time) *upkeep {
	u := &upkeep{s: s, trims: map[string]*trimState{}, statFree: statFree, syncFS: syncFS}
	for _, m := range []string{"/", DataMount} {
		// The first timed trim comes ten minutes after the agent starts,
		// away from the boot.
		u.trims[m] = &trimState{last: now.Add(-trimEvery + 10*time.Minute), lowFree: ^uint64(0)}
	}
	return u
}

// RunUpkeep does the upkeep until ctx ends.
func (s *Disks) RunUpkeep(ctx context.Context, every time.Duration) {
	u := s.currentUpkeep()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.upkeepMu.Lock()
			u.round(ctx, now)
			s.upkeepMu.Unlock()
		}
	}
}

// currentUpkeep is the agent's upkeep state, made on first use: the
// rounds and a quiesce before an idle pause share what was trimmed when.
func (s *Disks) currentUpkeep() *upkeep {
	s.upkeepMu.Lock()
	defer s.upkeepMu.Unlock()
	if s.upkeepState == nil {
		s.upkeepState = newUpkeep(s, time.Now())
	}
	return s.upkeepState
}

// pauseTrimMin: before an idle pause, a file system that freed at least
// this much since its last trim is trimmed, so the host gets the space
// back while the VM sleeps; less is left to the hourly round.
const pauseTrimMin = 8 << 20

// quiesceTrimTimeout bounds the trims of one quiesce: the host agent waits
// for them before it pauses, and a docker call meanwhile cancels them.
const quiesceTrimTimeout = 60 * time.Second

// TrimBeforePause trims the file systems that freed at least pauseTrimMin
// since their last trim, within quiesceTrimTimeout.
func (s *Disks) TrimBeforePause(ctx context.Context) {
	u := s.currentUpkeep()
	s.upkeepMu.Lock()
	defer s.upkeepMu.Unlock()
	tctx, cancel := context.WithTimeout(ctx, quiesceTrimTimeout)
	defer cancel()
	u.trimWhere(tctx, time.Now(), func(_ trimState, freed uint64, _ time.Time) bool { return freed >= pauseTrimMin })
}

// round is one upkeep pass.
func (u *upkeep) round(ctx context.Context, now time.Time) {
	u.reclaim()
	u.trim(ctx, now)
}

// psi is the "some" line of /proc/pressure/memory.
type psi struct {
	Avg10 float64
	Total uint64 // µs some task stalled on memory, since boot
}

// parsePSI reads "some avg10=0.00 avg60=0.00 avg300=0.00 total=1234".
func parsePSI(b []byte) (psi, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "some" {
			continue
		}
		var p psi
		var haveTotal bool
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "avg10":
				p.Avg10, err = strconv.ParseFloat(v, 64)
			case "total":
				p.Total, err = strconv.ParseUint(v, 10, 64)
				haveTotal = err == nil
			}
			if err != nil {
				return psi{}, fmt.Errorf("memory pressure %q: %w", kv, err)
			}
		}
		if !haveTotal {
			return psi{}, errors.New("memory pressure: no total")
		}
		return p, nil
	}
	return psi{}, errors.New("memory pressure: no \"some\" line")
}

// quiet reports whether p shows no memory pressure since the previous
// look (prev): the first look only sets the baseline.
func quiet(prev uint64, havePrev bool, p psi) bool {
	return havePrev && p.Total >= prev && p.Total-prev <= psiQuiet && p.Avg10 <= 1
}

// reclaimAmount is how much of a cgroup's inactive file cache one quiet
// round reclaims: none below reclaimMin, else half, at most reclaimMax,
// in whole pages.
func reclaimAmount(inactiveFile uint64) uint64 {
	if inactiveFile < reclaimMin {
		return 0
	}
	n := min(inactiveFile/2, reclaimMax)
	return n &^ (4096 - 1)
}

// statField reads one "key value" field of a memory.stat (or meminfo
// style, with a colon and kB unit) file.
func statField(b []byte, key string) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.TrimSuffix(f[0], ":") != key {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, false
		}
		if len(f) > 2 && f[2] == "kB" {
			n <<= 10
		}
		return n, true
	}
	return 0, false
}

// reclaimTarget is a cgroup to reclaim from and its inactive file cache.
type reclaimTarget struct {
	Dir          string // under Root
	InactiveFile uint64
}

// reclaimTargets are the cgroups whose memory.reclaim the round writes:
// the root cgroup when its memory.reclaim exists (it covers every slice,
// the containers' included), else each top-level cgroup that has one
// (system.slice holds docker's and containerd's containers under the
// systemd cgroup driver; docker/ under cgroupfs). Each with the inactive
// file cache its memory.stat reports (the root's from /proc/meminfo when
// it has no memory.stat).
func (s *Disks) reclaimTargets() ([]reclaimTarget, error) {
	root := s.Path(cgroupRoot)
	if fsutil.Exists(filepath.Join(root, "memory.reclaim")) {
		t := reclaimTarget{Dir: root}
		if b, err := os.ReadFile(filepath.Join(root, "memory.stat")); err == nil {
			t.InactiveFile, _ = statField(b, "inactive_file")
		} else if b, err := os.ReadFile(s.Path("/proc/meminfo")); err == nil {
			t.InactiveFile, _ = statField(b, "Inactive(file)")
		}
		return []reclaimTarget{t}, nil
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []reclaimTarget
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() || !fsutil.Exists(filepath.Join(dir, "memory.reclaim")) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
		if err != nil {
			continue
		}
		n, _ := statField(b, "inactive_file")
		out = append(out, reclaimTarget{Dir: dir, InactiveFile: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

// swapOn reports whether the guest has swap: memory.reclaim would then
// swap anonymous memory out too, which this upkeep never wants.
func (s *Disks) swapOn() bool {
	b, err := os.ReadFile(s.Path("/proc/meminfo"))
	if err != nil {
		return true // unknown: stay on the safe side
	}
	n, ok := statField(b, "SwapTotal")
	return !ok || n > 0
}

// reclaim does the memory half of a round: reclaim cold page cache when
// the guest had no memory pressure since the last round.
func (u *upkeep) reclaim() {
	if u.noReclaim {
		return
	}
	s := u.s
	b, err := os.ReadFile(s.Path(psiMemory))
	if err != nil {
		u.off("no memory pressure information (PSI)", err)
		return
	}
	p, err := parsePSI(b)
	if err != nil {
		u.off("memory pressure unreadable", err)
		return
	}
	calm := quiet(u.psiTotal, u.psiSeen, p)
	u.psiTotal, u.psiSeen = p.Total, true
	if !calm {
		return
	}
	u.reclaimCold()
}

// reclaimCold asks the kernel to drop part of each cgroup's inactive file
// cache (reclaimAmount), unless the guest has swap.
func (u *upkeep) reclaimCold() {
	if u.noReclaim {
		return
	}
	s := u.s
	if s.swapOn() {
		u.off("the guest has swap; reclaiming would swap out", nil)
		return
	}
	targets, err := s.reclaimTargets()
	if err != nil || len(targets) == 0 {
		u.off("no cgroup v2 memory.reclaim", err)
		return
	}
	for _, t := range targets {
		n := reclaimAmount(t.InactiveFile)
		if n == 0 {
			continue
		}
		err := os.WriteFile(filepath.Join(t.Dir, "memory.reclaim"), []byte(strconv.FormatUint(n, 10)), 0)
		switch {
		case err == nil:
			s.Logger().Debug("reclaimed cold page cache", "cgroup", t.Dir, "bytes", n)
		case errors.Is(err, unix.EAGAIN):
			// Less than asked was reclaimable: fine, it is a ceiling.
			s.Logger().Debug("reclaimed part of the cold page cache", "cgroup", t.Dir, "asked", n)
		default:
			u.off("memory.reclaim refused", err)
			return
		}
	}
}

// off stops the memory half for the agent's life, saying why once.
func (u *upkeep) off(why string, err error) {
	u.noReclaim = true
	if err != nil {
		u.s.Logger().Info("idle page cache reclaim off: "+why, "err", err)
	} else {
		u.s.Logger().Info("idle page cache reclaim off: " + why)
	}
}

// freedSinceTrim estimates the bytes a file system freed since its last
// trim that had reached its disk: the growth of its free space over the
// least seen since (a delete after a write the rounds saw), or, when ext4
// counts what it wrote, what it wrote since less what it still holds of
// that (free space now against then). The second catches a write and its
// delete between two rounds; an overwrite in place makes it guess high,
// which costs one fstrim of little.
func freedSinceTrim(st trimState, free, written uint64, haveWritten bool) uint64 {
	var est uint64
	if free > st.lowFree {
		est = free - st.lowFree
	}
	if haveWritten && st.haveWritten && written >= st.writtenAtTrim {
		if w := int64(written-st.writtenAtTrim) + int64(free) - int64(st.freeAtTrim); w > 0 && uint64(w) > est {
			est = uint64(w)
		}
	}
	return est
}

// trimDue reports whether a file system in state st that freed freed
// bytes since its last trim should be trimmed at now: hourly, or when it
// freed trimGrowth (an image, volume or container removed), at most once
// per trimGap.
func trimDue(st trimState, freed uint64, now time.Time) bool {
	since := now.Sub(st.last)
	if since >= trimEvery {
		return true
	}
	return since >= trimGap && freed >= trimGrowth
}

// trim does the disk half of a round.
func (u *upkeep) trim(ctx context.Context, now time.Time) {
	u.trimWhere(ctx, now, trimDue)
}

// trimWhere runs fstrim on each file system that due says should be,
// given what it freed since its last trim.
func (u *upkeep) trimWhere(ctx context.Context, now time.Time, due func(st trimState, freed uint64, now time.Time) bool) {
	mounts := make([]string, 0, len(u.trims))
	for m := range u.trims {
		mounts = append(mounts, m)
	}
	sort.Strings(mounts)
	for _, m := range mounts {
		st := u.trims[m]
		me, ok, err := u.s.MountedAt(m)
		if m != "/" && (err != nil || !ok) {
			continue
		}
		free, err := u.statFree(u.s.Path(m))
		if err != nil {
			continue
		}
		written, haveWritten := u.s.ext4Written(me.Source)
		if !st.seen {
			st.seen, st.freeAtTrim, st.writtenAtTrim, st.haveWritten = true, free, written, haveWritten
		}
		if free < st.lowFree {
			st.lowFree = free
		}
		if !due(*st, freedSinceTrim(*st, free, written, haveWritten), now) {
			continue
		}
		if err := u.syncFS(u.s.Path(m)); err != nil {
			u.s.Logger().Debug("sync before fstrim", "mount", m, "err", err)
		}
		tctx, cancel := context.WithTimeout(ctx, trimTimeout)
		out, err := u.s.OS.Run(tctx, "fstrim", "-v", m)
		cancel()
		// Whatever happened, wait for the next reason: a failing fstrim
		// must not run every round.
		st.last = now
		if f, ferr := u.statFree(u.s.Path(m)); ferr == nil {
			free = f
		}
		st.lowFree, st.freeAtTrim = free, free
		st.writtenAtTrim, st.haveWritten = u.s.ext4Written(me.Source)
		if err != nil {
			u.s.Logger().Warn("fstrim", "mount", m, "err", err)
			continue
		}
		u.s.Logger().Info("trimmed", "mount", m, "fstrim", strings.TrimSpace(string(out)))
	}
}

// ext4Written is the bytes the ext4 file system on dev (a /dev path) has
// written to its disk in its lifetime, from /sys/fs/ext4/<dev>/
// lifetime_write_kbytes; false when there is no such count.
func (s *Disks) ext4Written(dev string) (uint64, bool) {
	name, ok := strings.CutPrefix(dev, "/dev/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return 0, false
	}
	b, err := os.ReadFile(s.Path(filepath.Join("/sys/fs/ext4", name, "lifetime_write_kbytes")))
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false
	}
	return n << 10, true
}

// statFree is the free bytes of the file system at path.
func statFree(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bfree * uint64(st.Bsize), nil
}

// syncFS commits the file system at path (syncfs(2)).
func syncFS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
