package vz

import (
	"testing"

	"github.com/vmdock/vmdock/vm/driver"
)

// Which vz case each mode means. A swap here (full <-> none, say) is the
// mistake the type checker cannot see; the values behind the names are
// held to vz's source by hack/darwincheck.
func TestDiskModeTables(t *testing.T) {
	wantSync := map[SyncMode]string{
		SyncFull:  "DiskImageSynchronizationModeFull",
		SyncFsync: "DiskImageSynchronizationModeFsync",
		SyncNone:  "DiskImageSynchronizationModeNone",
	}
	if len(syncModes) != len(wantSync) {
		t.Errorf("syncModes has %d entries, want %d", len(syncModes), len(wantSync))
	}
	for mode, name := range wantSync {
		if got := syncModes[mode].Name; got != name {
			t.Errorf("sync mode %s maps to %q, want %q", mode, got, name)
		}
	}
	wantCaching := map[CachingMode]string{CachingCached: "DiskImageCachingModeCached"}
	if len(cachingModes) != len(wantCaching) {
		t.Errorf("cachingModes has %d entries, want %d", len(cachingModes), len(wantCaching))
	}
	for mode, name := range wantCaching {
		if got := cachingModes[mode].Name; got != name {
			t.Errorf("caching mode %s maps to %q, want %q", mode, got, name)
		}
	}
}

// Every mode Plan can produce has a table entry: a missing one would
// become vz's zero value (Automatic caching, an invalid sync mode).
func TestEveryPlannedDiskModeIsMapped(t *testing.T) {
	for _, flag := range []string{"", driver.DiskSyncFull, driver.DiskSyncFsync, driver.DiskSyncNone} {
		spec := baseSpec(t)
		spec.DiskSync = flag
		p, err := Plan(spec, armHost)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.Disks {
			if _, ok := syncModes[d.Sync]; !ok {
				t.Errorf("--disk-sync %q: sync mode %q has no vz case", flag, d.Sync)
			}
			if _, ok := cachingModes[d.Caching]; !ok {
				t.Errorf("--disk-sync %q: caching mode %q has no vz case", flag, d.Caching)
			}
		}
	}
}

func TestVZEnumCasesAreSortedAndComplete(t *testing.T) {
	pkg, cases := VZEnumCases()
	if pkg != "github.com/Code-Hex/vz/v3" {
		t.Errorf("package = %q", pkg)
	}
	if len(cases) != len(syncModes)+len(cachingModes) {
		t.Errorf("%d cases, want %d", len(cases), len(syncModes)+len(cachingModes))
	}
	for i := 1; i < len(cases); i++ {
		if cases[i-1].Name >= cases[i].Name {
			t.Errorf("cases not sorted: %q before %q", cases[i-1].Name, cases[i].Name)
		}
	}
}

// The console appends: the host agent reads the log from its size before
// the start, and a truncated log would hide this boot's panic.
func TestConsoleAppends(t *testing.T) {
	p, err := Plan(baseSpec(t), armHost)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Console.Append || p.Console.Log != "/inst/serial.log" {
		t.Errorf("console = %+v, want the serial log in append mode", p.Console)
	}
	if !hasParam(p.Boot.Cmdline, "console=hvc0") {
		t.Errorf("cmdline %q lacks console=hvc0, the virtio console vz attaches", p.Boot.Cmdline)
	}
}
