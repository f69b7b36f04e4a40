package disks

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/agent/guest/guestos/guestostest"
	"github.com/vmdock/vmdock/internal/shortdir"
)

func TestParsePSI(t *testing.T) {
	p, err := parsePSI([]byte("some avg10=0.12 avg60=0.00 avg300=0.00 total=4321\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=99\n"))
	if err != nil || p.Avg10 != 0.12 || p.Total != 4321 {
		t.Fatalf("parsePSI = %+v, %v", p, err)
	}
	for _, bad := range []string{"", "full avg10=0.00 total=1\n", "some avg10=x total=1\n", "some avg10=0.00\n", "some total=-1\n"} {
		if _, err := parsePSI([]byte(bad)); err == nil {
			t.Errorf("parsePSI(%q): no error", bad)
		}
	}
}

func TestQuiet(t *testing.T) {
	tests := []struct {
		name     string
		prev     uint64
		havePrev bool
		p        psi
		want     bool
	}{
		{"first look sets the baseline", 0, false, psi{Total: 10}, false},
		{"no stall", 1000, true, psi{Total: 1000}, true},
		{"noise", 1000, true, psi{Total: 1000 + psiQuiet}, true},
		{"stalls", 1000, true, psi{Total: 1001 + psiQuiet}, false},
		{"some recent pressure", 1000, true, psi{Total: 1000, Avg10: 1}, true},
		{"recent pressure", 1000, true, psi{Total: 1000, Avg10: 1.5}, false},
		{"counter went back", 1000, true, psi{Total: 10}, false},
	}
	for _, tc := range tests {
		if got := quiet(tc.prev, tc.havePrev, tc.p); got != tc.want {
			t.Errorf("%s: quiet = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReclaimAmount(t *testing.T) {
	tests := []struct{ inactive, want uint64 }{
		{0, 0},
		{reclaimMin - 1, 0},
		{reclaimMin, reclaimMin / 2},
		{100<<20 + 123, 50 << 20},
		{1 << 30, reclaimMax},
	}
	for _, tc := range tests {
		if got := reclaimAmount(tc.inactive); got != tc.want {
			t.Errorf("reclaimAmount(%d) = %d, want %d", tc.inactive, got, tc.want)
		}
	}
}

func TestStatField(t *testing.T) {
	stat := []byte("anon 100\nfile 5000\ninactive_file 4096\nactive_file 904\n")
	if n, ok := statField(stat, "inactive_file"); !ok || n != 4096 {
		t.Errorf("inactive_file = %d, %v", n, ok)
	}
	if _, ok := statField(stat, "inactive_anon"); ok {
		t.Errorf("found a field that is not there")
	}
	meminfo := []byte("MemTotal:        2000000 kB\nInactive(file):     1024 kB\nSwapTotal:             0 kB\n")
	if n, ok := statField(meminfo, "Inactive(file)"); !ok || n != 1<<20 {
		t.Errorf("Inactive(file) = %d, %v", n, ok)
	}
}

// guestTree is a fake guest: /proc/pressure/memory, /proc/meminfo and a
// cgroup tree under a temp root.
type guestTree struct {
	t    *testing.T
	root string
}

func newGuestTree(t *testing.T) *guestTree {
	g := &guestTree{t: t, root: shortdir.New(t)}
	g.write("/proc/meminfo", "MemTotal: 2000000 kB\nSwapTotal: 0 kB\n")
	g.psi(0)
	return g
}

func (g *guestTree) write(p, content string) {
	g.t.Helper()
	full := filepath.Join(g.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		g.t.Fatal(err)
	}
}

func (g *guestTree) read(p string) string {
	b, _ := os.ReadFile(filepath.Join(g.root, p))
	return string(b)
}

func (g *guestTree) psi(total uint64) {
	g.write(psiMemory, "some avg10=0.00 avg60=0.00 avg300=0.00 total="+itoa(total)+"\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
}

// cgroup makes a cgroup with memory.reclaim (empty) and memory.stat.
func (g *guestTree) cgroup(rel string, inactiveFile uint64) {
	dir := filepath.Join(cgroupRoot, rel)
	g.write(filepath.Join(dir, "memory.reclaim"), "")
	g.write(filepath.Join(dir, "memory.stat"), "anon 1000\ninactive_file "+itoa(inactiveFile)+"\nactive_file 5000\n")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func (g *guestTree) upkeep(fos *guestostest.FakeOS) *upkeep {
	s := &Disks{Sys: guestos.Sys{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), OS: fos, Root: g.root}}
	u := newUpkeep(s, time.Now())
	u.statFree = func(string) (uint64, error) { return 0, errors.New("no file systems here") }
	u.syncFS = func(string) error { return nil }
	return u
}

// Without memory.reclaim at the root, each top-level cgroup that has one
// gets its own bounded amount, only after a round without pressure.
func TestReclaimTopLevelCgroups(t *testing.T) {
	g := newGuestTree(t)
	g.cgroup("system.slice", 600<<20)
	g.cgroup("user.slice", 1<<20) // too little to bother
	g.write(filepath.Join(cgroupRoot, "init.scope", "memory.stat"), "inactive_file 999999999\n")
	u := g.upkeep(&guestostest.FakeOS{})

	u.reclaim() // baseline only
	if got := g.read(cgroupRoot + "/system.slice/memory.reclaim"); got != "" {
		t.Fatalf("reclaimed on the first look: %q", got)
	}
	g.psi(1000 + psiQuiet) // stalled since: no reclaim
	u.reclaim()
	if got := g.read(cgroupRoot + "/system.slice/memory.reclaim"); got != "" {
		t.Fatalf("reclaimed under pressure: %q", got)
	}
	u.reclaim() // no stall since the last look
	if got, want := g.read(cgroupRoot+"/system.slice/memory.reclaim"), itoa(reclaimMax); got != want {
		t.Fatalf("system.slice reclaim = %q, want %q", got, want)
	}
	if got := g.read(cgroupRoot + "/user.slice/memory.reclaim"); got != "" {
		t.Errorf("user.slice's 1 MiB reclaimed: %q", got)
	}
	if u.noReclaim {
		t.Errorf("reclaim switched off")
	}
}

// The root's memory.reclaim covers everything: it alone is written.
func TestReclaimRootCgroup(t *testing.T) {
	g := newGuestTree(t)
	g.cgroup("", 100<<20)
	g.cgroup("system.slice", 600<<20)
	u := g.upkeep(&guestostest.FakeOS{})
	u.reclaim()
	u.reclaim()
	if got, want := g.read(cgroupRoot+"/memory.reclaim"), itoa(50<<20); got != want {
		t.Fatalf("root reclaim = %q, want %q", got, want)
	}
	if got := g.read(cgroupRoot + "/system.slice/memory.reclaim"); got != "" {
		t.Errorf("system.slice written as well: %q", got)
	}
}

// The root without memory.stat: its inactive cache is /proc/meminfo's.
func TestReclaimRootFromMeminfo(t *testing.T) {
	g := newGuestTree(t)
	g.write(cgroupRoot+"/memory.reclaim", "")
	g.write("/proc/meminfo", "MemTotal: 2000000 kB\nInactive(file): 81920 kB\nSwapTotal: 0 kB\n")
	u := g.upkeep(&guestostest.FakeOS{})
	u.reclaim()
	u.reclaim()
	if got, want := g.read(cgroupRoot+"/memory.reclaim"), itoa(40<<20); got != want {
		t.Fatalf("root reclaim = %q, want %q", got, want)
	}
}

// With swap, reclaim could push anonymous memory out: it stays off. So it
// does without PSI or without any memory.reclaim, and says so once.
func TestReclaimOff(t *testing.T) {
	g := newGuestTree(t)
	g.cgroup("system.slice", 600<<20)
	g.write("/proc/meminfo", "SwapTotal: 1024 kB\n")
	u := g.upkeep(&guestostest.FakeOS{})
	u.reclaim()
	u.reclaim()
	if got := g.read(cgroupRoot + "/system.slice/memory.reclaim"); got != "" || !u.noReclaim {
		t.Fatalf("with swap: wrote %q, off %v", got, u.noReclaim)
	}

	g = newGuestTree(t)
	u = g.upkeep(&guestostest.FakeOS{})
	u.reclaim()
	u.reclaim()
	if !u.noReclaim {
		t.Errorf("no memory.reclaim anywhere, yet not off")
	}

	g = newGuestTree(t)
	os.Remove(filepath.Join(g.root, psiMemory))
	u = g.upkeep(&guestostest.FakeOS{})
	u.reclaim()
	if !u.noReclaim {
		t.Errorf("no PSI, yet not off")
	}
}

func TestTrimDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		last  time.Duration // ago
		freed uint64
		want  bool
	}{
		{"nothing freed", 10 * time.Minute, 0, false},
		{"a little freed", 10 * time.Minute, trimGrowth - 1, false},
		{"an image removed", 10 * time.Minute, 300 << 20, true},
		{"removed right after a trim", 30 * time.Second, 300 << 20, false},
		{"hourly", time.Hour, 0, true},
	}
	for _, tc := range tests {
		if got := trimDue(trimState{last: now.Add(-tc.last)}, tc.freed, now); got != tc.want {
			t.Errorf("%s: trimDue = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFreedSinceTrim(t *testing.T) {
	const gib = 1 << 30
	// At the last trim: 5 GiB free, 100 GiB written in the file system's
	// life.
	tests := []struct {
		name          string
		lowFree, free uint64
		written       uint64
		haveWritten   bool
		want          uint64
	}{
		// 1 GiB pulled (written, free down), then removed: seen both ways.
		{"pull then remove, seen", 4 * gib, 5 * gib, 101 * gib, true, gib},
		{"same, no write count", 4 * gib, 5 * gib, 0, false, gib},
		// Written and removed between two rounds: only the write count
		// tells.
		{"write then delete between rounds", 5 * gib, 5 * gib, 100*gib + 300<<20, true, 300 << 20},
		{"written and kept", 4 * gib, 4 * gib, 101 * gib, true, 0},
		{"deleted before it reached the disk", 4 * gib, 5 * gib, 100 * gib, true, gib},
		{"counter reset (a new file system)", 5 * gib, 5 * gib, 1, true, 0},
	}
	for _, tc := range tests {
		st := trimState{lowFree: tc.lowFree, freeAtTrim: 5 * gib, writtenAtTrim: 100 * gib, haveWritten: true}
		if got := freedSinceTrim(st, tc.free, tc.written, tc.haveWritten); got != tc.want {
			t.Errorf("%s: freed %d MiB, want %d MiB", tc.name, got>>20, tc.want>>20)
		}
	}
}

// A file system's free space dips (an image pulled) and grows back (it is
// removed): fstrim runs once on it, after a sync, and not again until the
// next delete or the hour. The data disk is trimmed only when mounted.
func TestTrimAfterDelete(t *testing.T) {
	g := newGuestTree(t)
	g.write("/proc/self/mountinfo", "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n")
	fos := &guestostest.FakeOS{Outputs: map[string]string{"fstrim": "/: 300 MiB (314572800 bytes) trimmed\n"}}
	u := g.upkeep(fos)
	free := uint64(5 << 30)
	u.statFree = func(p string) (uint64, error) {
		if p != filepath.Join(g.root, "/") {
			t.Errorf("statFree(%s)", p)
		}
		return free, nil
	}
	var synced int
	u.syncFS = func(string) error { synced++; return nil }
	start := time.Now()
	u.trim(context.Background(), start)
	free -= 300 << 20 // pulled
	u.trim(context.Background(), start.Add(30*time.Second))
	if got := fos.Ran(); got != "" {
		t.Fatalf("trimmed with nothing freed: %s", got)
	}
	free += 300 << 20 // removed
	u.trim(context.Background(), start.Add(60*time.Second))
	if got := fos.Ran(); got != "fstrim -v /" || synced != 1 {
		t.Fatalf("after the delete ran %q, synced %d", got, synced)
	}
	u.trim(context.Background(), start.Add(90*time.Second))
	u.trim(context.Background(), start.Add(30*time.Minute))
	if got := fos.Ran(); got != "fstrim -v /" {
		t.Fatalf("trimmed again with nothing new freed: %s", got)
	}
	u.trim(context.Background(), start.Add(61*time.Minute))
	if got := fos.Ran(); got != "fstrim -v /\nfstrim -v /" {
		t.Fatalf("no hourly trim: %s", got)
	}

	g.write("/proc/self/mountinfo", "22 1 254:0 / / rw - ext4 /dev/vda rw\n30 22 254:16 / "+DataMount+" rw - ext4 /dev/vdc rw\n")
	u.statFree = func(string) (uint64, error) { return free, nil }
	u.trim(context.Background(), start.Add(130*time.Minute))
	if got := fos.Ran(); !strings.HasSuffix(got, "fstrim -v /\nfstrim -v "+DataMount) {
		t.Fatalf("data disk not trimmed once mounted: %s", got)
	}
}

// A write and its delete both between two rounds: ext4's write count
// tells the rounds what their free-space samples missed.
func TestTrimAfterUnseenWriteAndDelete(t *testing.T) {
	g := newGuestTree(t)
	g.write("/proc/self/mountinfo", "22 1 254:0 / / rw - ext4 /dev/vda rw\n")
	g.write("/sys/fs/ext4/vda/lifetime_write_kbytes", "1000000\n")
	fos := &guestostest.FakeOS{}
	u := g.upkeep(fos)
	u.statFree = func(string) (uint64, error) { return 5 << 30, nil }
	start := time.Now()
	u.trim(context.Background(), start)
	g.write("/sys/fs/ext4/vda/lifetime_write_kbytes", itoa(1000000+(300<<10))+"\n") // 300 MiB
	u.trim(context.Background(), start.Add(90*time.Second))
	if got := fos.Ran(); got != "fstrim -v /" {
		t.Fatalf("ran %q", got)
	}
	u.trim(context.Background(), start.Add(4*time.Minute))
	if got := fos.Ran(); got != "fstrim -v /" {
		t.Fatalf("trimmed again with nothing written since: %q", got)
	}
}

// A failing fstrim waits for the next reason like a good one.
func TestTrimFailureWaits(t *testing.T) {
	g := newGuestTree(t)
	g.write("/proc/self/mountinfo", "22 1 254:0 / / rw - ext4 /dev/vda rw\n")
	fos := &guestostest.FakeOS{Results: map[string]error{"fstrim": guestostest.ExitErr(1)}}
	u := g.upkeep(fos)
	u.statFree = func(string) (uint64, error) { return 1 << 30, nil }
	start := time.Now()
	u.trim(context.Background(), start.Add(trimEvery))
	u.trim(context.Background(), start.Add(trimEvery+30*time.Second))
	if got := fos.Ran(); got != "fstrim -v /" {
		t.Fatalf("ran %q", got)
	}
}

// Before a pause the guest trims what it freed (at least pauseTrimMin).
func TestTrimBeforePauseTrimsFreedSpace(t *testing.T) {
	g := newGuestTree(t)
	g.write("/proc/self/mountinfo", "22 1 254:0 / / rw - ext4 /dev/vda rw\n")
	fos := &guestostest.FakeOS{}
	u := g.upkeep(fos)
	free := uint64(5 << 30)
	u.statFree = func(string) (uint64, error) { return free, nil }
	s := u.s
	s.upkeepState = u
	u.trim(context.Background(), time.Now()) // the first look: a baseline only

	free += 4 << 20 // a little freed: left to the hourly round
	s.TrimBeforePause(context.Background())
	if got := fos.Ran(); got != "" {
		t.Fatalf("trimmed %q for 4 MiB freed", got)
	}
	free += 300 << 20 // an image removed
	s.TrimBeforePause(context.Background())
	if got := fos.Ran(); got != "fstrim -v /" {
		t.Fatalf("after 300 MiB freed the trim before a pause ran %q, want fstrim -v /", got)
	}
}
