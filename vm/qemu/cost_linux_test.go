package qemu

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

// selfMachine is a Machine whose "qemu" is the test process, so Memory
// and CPUTime read the test's own /proc files.
func selfMachine(t *testing.T, memoryMiB int) *Machine {
	t.Helper()
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return &Machine{spec: driver.Spec{MemoryMiB: memoryMiB}, cmd: &exec.Cmd{Process: p}, qemuGone: make(chan struct{})}
}

// A shared anonymous mapping of an unusual size stands in for the guest
// RAM (shared like the memfd one: it cannot merge with the heap's
// mappings); the part the test touched is its resident size.
func TestMemoryFindsGuestRAMInOwnSmaps(t *testing.T) {
	const ramMiB, touched = 37, 5 << 20
	ram, err := syscall.Mmap(-1, 0, ramMiB<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(ram)
	for i := 0; i < touched; i += os.Getpagesize() {
		ram[i] = 1
	}
	use, err := selfMachine(t, ramMiB).Memory()
	if err != nil {
		t.Fatal(err)
	}
	// Shared memory may come in 2 MiB huge pages: up to one more.
	if use.GuestRAMResident < touched || use.GuestRAMResident > touched+2<<20 {
		t.Errorf("guest RAM resident = %d, want the %d bytes touched", use.GuestRAMResident, touched)
	}
	if use.Resident < use.GuestRAMResident+1<<20 {
		t.Errorf("process resident = %d, want more than the guest RAM's %d", use.Resident, use.GuestRAMResident)
	}
}

func TestCPUTimeOfOwnProcessGrows(t *testing.T) {
	m := selfMachine(t, 128)
	before, err := m.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the count moves (10 ms ticks), however busy the host.
	for deadline := time.Now().Add(5 * time.Second); ; {
		after, err := m.CPUTime()
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed %v over 5 s of spinning", before)
		}
	}
}

func TestCostOfReapedQEMUIsAnError(t *testing.T) {
	m := selfMachine(t, 128)
	close(m.qemuGone)
	if _, err := m.CPUTime(); err == nil {
		t.Error("CPUTime of a reaped qemu succeeded")
	}
	if _, err := m.Memory(); err == nil {
		t.Error("Memory of a reaped qemu succeeded")
	}
}
