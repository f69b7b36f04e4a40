package memtrim

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestExeMappingsTakesTheBinarysReadOnlyMappings(t *testing.T) {
	maps := `00400000-00a00000 r-xp 00000000 0b:00 12 /run/vmdock/cidata/vmdock-agent
00a00000-00c00000 r--p 00600000 0b:00 12 /run/vmdock/cidata/vmdock-agent
00c00000-00c40000 rw-p 00800000 0b:00 12 /run/vmdock/cidata/vmdock-agent
00c40000-00c80000 rw-p 00000000 00:00 0
c000000000-c000400000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r-xp 00000000 08:01 99 /usr/lib/other.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
`
	got, err := exeMappings(maps, "/run/vmdock/cidata/vmdock-agent")
	if err != nil {
		t.Fatal(err)
	}
	want := []codeMapping{{0x400000, 0xa00000}, {0xa00000, 0xc00000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("mappings %x, want %x (code and rodata, not data, heap or other files)", got, want)
	}
	if _, err := exeMappings("zz-00 r-xp 0 0:0 1 /x\n", "/x"); err == nil {
		t.Error("a bad address range was accepted")
	}
}

// The real call on this test binary: the resident part of its code and
// read-only data shrinks, and the test keeps running (the pages it needs
// fault back in).
func TestDropColdCodePagesOutThisBinarysCode(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	before := codeRSSKiB(t, exe)
	if before == 0 {
		t.Fatalf("no resident code of %s in /proc/self/smaps", exe)
	}
	if err := dropColdCode(); err != nil {
		t.Fatal(err)
	}
	after := codeRSSKiB(t, exe)
	t.Logf("resident code and rodata: %d KiB before, %d KiB after", before, after)
	if after*2 > before {
		t.Errorf("resident code went from %d to %d KiB; want less than half", before, after)
	}
}

// codeRSSKiB sums the resident size of exe's non-writable mappings.
func codeRSSKiB(t *testing.T, exe string) int {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	total, inCode := 0, false
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			inCode = len(f) >= 6 && f[5] == exe && !strings.Contains(f[1], "w")
			continue
		}
		if inCode && len(f) >= 2 && f[0] == "Rss:" {
			n, _ := strconv.Atoi(f[1])
			total += n
		}
	}
	return total
}

func TestResidentBytesOfThisProcess(t *testing.T) {
	if r := residentBytes(); r < 1<<20 || r > 1<<40 {
		t.Fatalf("resident size %d bytes", r)
	}
}

func TestNoHugePagesSetsTheProcessFlag(t *testing.T) {
	if err := NoHugePages(); err != nil {
		t.Fatal(err)
	}
	got, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0)
	if err != nil || got != 1 {
		t.Fatalf("PR_GET_THP_DISABLE = %d, %v; want 1", got, err)
	}
}
