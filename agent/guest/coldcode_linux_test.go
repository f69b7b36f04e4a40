package guest

import (
	"os"
	"testing"
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

// The real call on this test binary: its code is paged out and the test
// keeps running (the pages fault back in).
func TestDropColdCodeOnThisProcess(t *testing.T) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	exe, _ := os.Executable()
	if ms, _ := exeMappings(string(maps), exe); len(ms) == 0 {
		t.Fatalf("no mapping of %s in /proc/self/maps", exe)
	}
	if err := dropColdCode(); err != nil {
		t.Fatal(err)
	}
}
