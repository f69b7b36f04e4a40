package hostagent

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/vmdock/vmdock/internal/sparsefile"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
)

// cpuSampleEvery is how often the host agent reads the VM process's CPU
// time: one small read every 10 s costs an idle host next to nothing, and
// six intervals make status's minute.
const (
	cpuSampleEvery = 10 * time.Second
	cpuWindow      = time.Minute
)

// cpuSample is the VM process's CPU time so far, read at a moment.
type cpuSample struct {
	at  time.Time
	cpu time.Duration
}

// cpuRing keeps the samples of the last cpuWindow, and the error that
// ended the sampling.
type cpuRing struct {
	mu      sync.Mutex
	samples [cpuWindow/cpuSampleEvery + 1]cpuSample
	n, next int
	err     error
}

func (r *cpuRing) add(s cpuSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n > 0 && s.cpu < r.samples[r.index(r.n-1)].cpu {
		// A new VM process counts from zero: the old samples are another's.
		r.n, r.next = 0, 0
	}
	r.samples[r.next] = s
	r.next = (r.next + 1) % len(r.samples)
	r.n = min(r.n+1, len(r.samples))
}

func (r *cpuRing) fail(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// index is the slot of the i-th kept sample, oldest first.
func (r *cpuRing) index(i int) int {
	return (r.next - r.n + i + len(r.samples)) % len(r.samples)
}

// usage is the CPU the VM process used between the oldest and the newest
// sample, in percent of one core, and that span; a zero span while fewer
// than two samples were taken.
func (r *cpuRing) usage() (percent float64, span time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n < 2 {
		return 0, 0, r.err
	}
	oldest, newest := r.samples[r.index(0)], r.samples[r.index(r.n-1)]
	span = newest.at.Sub(oldest.at)
	if span <= 0 {
		return 0, 0, r.err
	}
	return 100 * float64(newest.cpu-oldest.cpu) / float64(span), span, nil
}

// sampleCPU reads the running VM's CPU time every cpuSampleEvery until ctx
// ends. The first error ends it: the process is gone, or the driver can
// never tell (vz), and neither gets better by asking again.
func (ha *hostAgent) sampleCPU(ctx context.Context) {
	r, ok := ha.currentMachine().(driver.CostReporter)
	if !ok {
		return
	}
	t := time.NewTicker(cpuSampleEvery)
	defer t.Stop()
	for {
		cpu, err := r.CPUTime()
		if err != nil {
			slog.Debug("CPU sampling ends", "err", err)
			ha.cpu.fail(err)
			return
		}
		ha.cpu.add(cpuSample{at: time.Now(), cpu: cpu})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// hostCost measures m's cost now: its memory (read afresh), the CPU use
// sampleCPU saw, and the disk files.
func (ha *hostAgent) hostCost(m driver.Machine) *control.HostCost {
	c := &control.HostCost{Disks: []control.DiskCost{
		diskCost("root", ha.inst.DiskPath()),
		diskCost("data", ha.inst.DataDiskPath()),
	}}
	r, ok := m.(driver.CostReporter)
	if !ok {
		c.Unmeasured = "the VM driver does not report memory and CPU"
		return c
	}
	mem, memErr := r.Memory()
	if memErr == nil {
		c.VMResidentBytes, c.GuestRAMResidentBytes = mem.Resident, mem.GuestRAMResident
	}
	pct, span, cpuErr := ha.cpu.usage()
	if span > 0 {
		c.CPUPercent, c.CPUWindowSeconds = &pct, span.Seconds()
	}
	// When both fail it is for one reason (vz, a gone process): say it once.
	switch {
	case memErr != nil:
		c.Unmeasured = memErr.Error()
	case cpuErr != nil:
		c.Unmeasured = cpuErr.Error()
	}
	return c
}

// diskCost is the disk file at path's size and space on the host.
func diskCost(name, path string) control.DiskCost {
	d := control.DiskCost{Name: name, Path: path}
	fi, err := os.Stat(path)
	if err != nil {
		d.Error = err.Error() // os.Stat's names the path
		return d
	}
	d.SizeBytes = fi.Size()
	if alloc, ok := sparsefile.Allocated(fi); ok {
		d.AllocatedBytes = alloc
	} else {
		d.Error = "the space the file takes is not known on this OS"
	}
	return d
}
