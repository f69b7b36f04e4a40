package qemu

import (
	"strings"
	"testing"
)

// smapsText is /proc/<pid>/smaps of a QEMU with 2 GiB of memfd RAM,
// shortened: the binary, TCG's 1 GiB code buffer (its own size, not the
// RAM's), the RAM block, an anonymous mapping and [vsyscall].
const smapsText = `55b6cbe3f000-55b6cc246000 r--p 00000000 fe:00 10166281                   /usr/bin/qemu-system-x86_64
Size:               4124 kB
KernelPageSize:        4 kB
Rss:                4124 kB
Pss:                4124 kB
VmFlags: rd mr mw me 
7f165ffff000-7f16dffff000 rw-s 00000000 00:01 579                        /memfd:memory-backend-memfd (deleted)
Size:            2097152 kB
Rss:              423056 kB
Pss:              211528 kB
VmFlags: rd wr sh mr mw me ms 
7f16e0000000-7f171ffff000 rwxp 00000000 00:00 0 
Size:            1048572 kB
Rss:              936776 kB
VmFlags: rd wr ex mr mw me ac 
7f1720000000-7f1720021000 rw-p 00000000 00:00 0 
Size:                132 kB
Rss:                  12 kB
VmFlags: rd wr mr mw me nr 
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
Size:                  4 kB
Rss:                   0 kB
VmFlags: ex 
`

func TestParseSmapsFindsGuestRAM(t *testing.T) {
	maps, err := parseSmaps(strings.NewReader(smapsText))
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{
		{size: 4124 << 10, rss: 4124 << 10},
		{size: 2 << 30, rss: 423056 << 10},
		{size: 1048572 << 10, rss: 936776 << 10},
		{size: 132 << 10, rss: 12 << 10},
		{size: 4 << 10, rss: 0},
	}
	if len(maps) != len(want) {
		t.Fatalf("parsed %d mappings, want %d: %+v", len(maps), len(want), maps)
	}
	for i := range want {
		if maps[i] != want[i] {
			t.Errorf("mapping %d = %+v, want %+v", i, maps[i], want[i])
		}
	}
	ram, ok := guestRAM(maps, 2048<<20)
	if !ok || ram.rss != 423056<<10 {
		t.Errorf("guest RAM = %+v, %v; want the memfd mapping's 423056 kB", ram, ok)
	}
	if _, ok := guestRAM(maps, 4096<<20); ok {
		t.Error("found a 4 GiB RAM block in a process without one")
	}
}

func TestParseSmapsRejectsGarbage(t *testing.T) {
	for _, text := range []string{
		"not a mapping\n",
		"7f16e0000000-7f171ffff000 rwxp 00000000 00:00 0\nRss: many kB\n",
		"7f16e0000000-7f171ffff000 rwxp 00000000 00:00 0\nRss: 12 MB\n",
	} {
		if maps, err := parseSmaps(strings.NewReader(text)); err == nil {
			t.Errorf("parseSmaps(%q) = %+v, want an error", text, maps)
		}
	}
}
