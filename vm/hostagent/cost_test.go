package hostagent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/sparsefile"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/store"
)

func TestCPURingUsage(t *testing.T) {
	var r cpuRing
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	if _, span, err := r.usage(); span != 0 || err != nil {
		t.Fatalf("empty ring: span %v, err %v", span, err)
	}
	r.add(cpuSample{at(0), 0})
	if _, span, _ := r.usage(); span != 0 {
		t.Fatalf("one sample gave a span of %v", span)
	}
	// 10 s apart: 0.5 s of CPU, then 2 s (20% of a core).
	r.add(cpuSample{at(10), 500 * time.Millisecond})
	if pct, span, _ := r.usage(); span != 10*time.Second || pct != 5 {
		t.Errorf("after 10 s: %v%% over %v, want 5%% over 10s", pct, span)
	}
	r.add(cpuSample{at(20), 2500 * time.Millisecond})
	if pct, span, _ := r.usage(); span != 20*time.Second || pct != 12.5 {
		t.Errorf("after 20 s: %v%% over %v, want 12.5%% over 20s", pct, span)
	}
	// Past a minute the oldest samples fall out: 10 s more, 1 s each.
	cpu := 2500 * time.Millisecond
	for s := 30; s <= 90; s += 10 {
		cpu += time.Second
		r.add(cpuSample{at(s), cpu})
	}
	if pct, span, _ := r.usage(); span != time.Minute || pct != 10 {
		t.Errorf("after 90 s: %v%% over %v, want 10%% over 1m0s", pct, span)
	}
	// A count that goes back is a new process: its samples alone count.
	r.add(cpuSample{at(100), time.Second})
	if _, span, _ := r.usage(); span != 0 {
		t.Errorf("after a new process's first sample: span %v, want none", span)
	}
	r.add(cpuSample{at(110), 4 * time.Second})
	if pct, span, _ := r.usage(); span != 10*time.Second || pct != 30 {
		t.Errorf("new process: %v%% over %v, want 30%% over 10s", pct, span)
	}
}

func TestCPURingKeepsSamplesAfterFailure(t *testing.T) {
	var r cpuRing
	boom := errors.New("gone")
	r.fail(boom)
	if _, _, err := r.usage(); !errors.Is(err, boom) {
		t.Errorf("usage without samples: err %v, want the sampling's", err)
	}
	t0 := time.Now()
	r.add(cpuSample{t0, 0})
	r.add(cpuSample{t0.Add(10 * time.Second), time.Second})
	if pct, _, err := r.usage(); err != nil || pct != 10 {
		t.Errorf("usage with samples: %v%%, %v", pct, err)
	}
}

// costMachine is a stub VM whose driver reports (or refuses) its cost.
type costMachine struct {
	stubMachine
	mem driver.MemoryUse
	err error
}

func (m *costMachine) CPUTime() (time.Duration, error)   { return 0, m.err }
func (m *costMachine) Memory() (driver.MemoryUse, error) { return m.mem, m.err }

// costAgent is a host agent whose instance has a 64 MiB root disk with
// 1 MiB written and a data disk that is all hole.
func costAgent(t *testing.T) *hostAgent {
	t.Helper()
	inst := &store.Instance{Name: "test", Dir: t.TempDir()}
	err := sparsefile.Create(inst.DiskPath(), os.O_EXCL, 0o600, func(f *os.File) error {
		if err := f.Truncate(64 << 20); err != nil {
			return err
		}
		_, err := f.Write([]byte(strings.Repeat("x", 1<<20)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sparsefile.New(inst.DataDiskPath(), os.O_EXCL, 0o600, 128<<20); err != nil {
		t.Fatal(err)
	}
	return &hostAgent{inst: inst}
}

func TestHostCostOfQEMULikeMachine(t *testing.T) {
	ha := costAgent(t)
	t0 := time.Now()
	ha.cpu.add(cpuSample{t0, time.Second})
	ha.cpu.add(cpuSample{t0.Add(20 * time.Second), 2 * time.Second})
	c := ha.hostCost(&costMachine{mem: driver.MemoryUse{Resident: 900 << 20, GuestRAMResident: 700 << 20}})
	if c.VMResidentBytes != 900<<20 || c.GuestRAMResidentBytes != 700<<20 || c.Unmeasured != "" {
		t.Errorf("memory: %+v", c)
	}
	if c.CPUPercent == nil || *c.CPUPercent != 5 || c.CPUWindowSeconds != 20 {
		t.Errorf("CPU: %v over %v s, want 5%% over 20 s", c.CPUPercent, c.CPUWindowSeconds)
	}
	if len(c.Disks) != 2 {
		t.Fatalf("disks: %+v", c.Disks)
	}
	root, data := c.Disks[0], c.Disks[1]
	if root.Name != "root" || root.Path != filepath.Join(ha.inst.Dir, "disk.raw") || root.SizeBytes != 64<<20 ||
		root.AllocatedBytes < 1<<20 || root.AllocatedBytes > 2<<20 || root.Error != "" {
		t.Errorf("root disk: %+v", root)
	}
	if data.Name != "data" || data.SizeBytes != 128<<20 || data.AllocatedBytes > 64<<10 || data.Error != "" {
		t.Errorf("data disk: %+v", data)
	}
}

// On vz the disks are measured and memory and CPU are left out, with the
// driver's reason in their place.
func TestHostCostOfVZLikeMachine(t *testing.T) {
	ha := costAgent(t)
	os.Remove(ha.inst.DataDiskPath())
	reason := errors.New("vz: the VM runs in Apple's XPC service")
	ha.cpu.fail(reason)
	b, err := json.Marshal(ha.hostCost(&costMachine{err: reason}))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, absent := range []string{"vmResidentBytes", "guestRamResidentBytes", "cpuPercent", "cpuWindowSeconds"} {
		if strings.Contains(got, absent) {
			t.Errorf("JSON has %s: %s", absent, got)
		}
	}
	for _, present := range []string{`"unmeasured":"vz: the VM runs in Apple's XPC service"`, `"name":"root","path":`, `"sizeBytes":67108864`, `"error":"stat `} {
		if !strings.Contains(got, present) {
			t.Errorf("JSON lacks %s: %s", present, got)
		}
	}
}

func TestHostCostOfMachineWithoutReporter(t *testing.T) {
	c := costAgent(t).hostCost(newStubMachine(true))
	if c.Unmeasured == "" || c.VMResidentBytes != 0 || c.CPUPercent != nil || len(c.Disks) != 2 {
		t.Errorf("cost of a machine that reports none: %+v", c)
	}
}
