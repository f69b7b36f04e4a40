package main

import (
	"context"

	"github.com/vmdock/vmdock/bench"
	"github.com/vmdock/vmdock/vm/control"
)

// benchCostFunc is the cost section's view of the host agent's status:
// `vmdock status --json`'s hostAgent.cost and hostAgent.idle, read on the
// control socket (answered from the host agent's state, so it never wakes
// a paused VM).
func benchCostFunc(c *control.Client) func(context.Context) (bench.HostCost, error) {
	return func(ctx context.Context) (bench.HostCost, error) {
		st, err := c.Status(ctx)
		if err != nil {
			return bench.HostCost{}, err
		}
		return benchCost(st), nil
	}
}

// benchCost picks the cost section's figures out of a host agent status.
func benchCost(st *control.Status) bench.HostCost {
	hc := bench.HostCost{DataAllocated: -1, DataErr: "the host agent reported no disks"}
	if c := st.Cost; c != nil {
		hc.VMResident, hc.GuestRAMResident, hc.Unmeasured = c.VMResidentBytes, c.GuestRAMResidentBytes, c.Unmeasured
		for _, d := range c.Disks {
			if d.Name != "data" {
				continue
			}
			hc.DataErr = d.Error
			if d.Error == "" {
				hc.DataAllocated = d.AllocatedBytes
			}
		}
	} else {
		hc.Unmeasured = "the host agent reported no cost (is the VM running?)"
	}
	if i := st.Idle; i != nil {
		hc.Paused, hc.Pauses, hc.IdleAfter, hc.IdleOff = i.Paused, i.Pauses, i.After, i.Off
		if i.LastWakeMs != nil {
			hc.LastWakeMs = *i.LastWakeMs
		}
	}
	return hc
}
