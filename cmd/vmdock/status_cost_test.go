package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/instance"
)

// status shows the host agent's cost figures on two lines, and on vz why
// memory and CPU are missing.
func TestStatusShowsHostCost(t *testing.T) {
	cpu := 3.25
	disks := []control.DiskCost{
		{Name: "root", SizeBytes: 64 << 30, AllocatedBytes: 3 << 30},
		{Name: "data", SizeBytes: 60 << 30, AllocatedBytes: 300 << 20},
	}
	for _, tc := range []struct {
		name string
		cost control.HostCost
		want []string
	}{
		{"qemu", control.HostCost{VMResidentBytes: 1900 << 20, GuestRAMResidentBytes: 600 << 20, CPUPercent: &cpu, CPUWindowSeconds: 60, Disks: disks}, []string{
			"host cost: VM 1.9 GiB resident (guest RAM 600 MiB), CPU 3.2% of a core over the last 60 s",
			"disks: root 3.0 GiB on the host of 64.0 GiB, data 300 MiB on the host of 60.0 GiB",
		}},
		{"vz", control.HostCost{Unmeasured: "vz: the VM runs in Apple's XPC service", Disks: disks[:1]}, []string{
			"host cost: not measured: vz: the VM runs in Apple's XPC service",
			"disks: root 3.0 GiB on the host of 64.0 GiB",
		}},
		{"first seconds", control.HostCost{Disks: []control.DiskCost{{Name: "data", Error: "stat x: no such file"}}}, []string{
			"host cost: measuring",
			"disks: data: stat x: no such file",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := statusJSON{Profile: "default", Status: instance.StateRunning, HostAgent: &control.Status{Cost: &tc.cost}}
			var out bytes.Buffer
			if err := writeStatusText(&out, s, instance.LiveStatus{State: instance.StateRunning}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(l, "host cost:") || strings.HasPrefix(l, "disks:") {
					got = append(got, strings.Join(strings.Fields(l), " "))
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("status:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
