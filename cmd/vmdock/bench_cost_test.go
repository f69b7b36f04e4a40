package main

import (
	"testing"

	"github.com/vmdock/vmdock/bench"
	"github.com/vmdock/vmdock/vm/control"
)

// The cost section reads the data disk's figures, the memory and the idle
// pause out of the status; a disk the host agent could not read is
// unknown (-1), not 0.
func TestBenchCost(t *testing.T) {
	wake := 42.5
	st := &control.Status{
		Cost: &control.HostCost{VMResidentBytes: 900, GuestRAMResidentBytes: 800, Disks: []control.DiskCost{
			{Name: "root", AllocatedBytes: 1},
			{Name: "data", AllocatedBytes: 2048},
		}},
		Idle: &control.IdleStatus{After: "10s", Paused: true, LastWakeMs: &wake},
	}
	want := bench.HostCost{VMResident: 900, GuestRAMResident: 800, DataAllocated: 2048, Paused: true, IdleAfter: "10s", LastWakeMs: 42.5}
	if got := benchCost(st); got != want {
		t.Errorf("benchCost = %+v, want %+v", got, want)
	}
	st.Cost.Disks[1] = control.DiskCost{Name: "data", Error: "stat: gone"}
	if got := benchCost(st); got.DataAllocated != -1 || got.DataErr != "stat: gone" {
		t.Errorf("unreadable data disk: %+v", got)
	}
	if got := benchCost(&control.Status{}); got.DataAllocated != -1 || got.Unmeasured == "" || got.IdleAfter != "" {
		t.Errorf("no cost, no idle: %+v", got)
	}
}
