// Package memtrim hands back to the OS what a long-running vmdock process
// (the host and guest agents) kept after a burst of work: the heap the
// burst grew, which Go's scavenger returns only slowly, and, on Linux, the
// binary's code pages the burst touched, which count in the process's RSS
// until the kernel needs the memory.
package memtrim

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Trim returns free heap to the OS and pages out the binary's cold code.
// One call costs a full collection: a few milliseconds for an agent's heap.
func Trim() error {
	debug.FreeOSMemory()
	return dropColdCode()
}

// QuietOptions say when a process counts as quiet; see WhenQuiet.
type QuietOptions struct {
	// Period is how often the allocation count is read (default 30 s).
	Period time.Duration
	// QuietBytes: a period that allocated fewer bytes is quiet (default
	// 1 MiB; an idle host agent allocates a few KiB a minute for its
	// keepalives and clock checks).
	QuietBytes uint64
	Logger     *slog.Logger
}

// WhenQuiet trims once each time the process goes quiet: on the first quiet
// period after a busy one. The process counts as busy when WhenQuiet starts
// (it runs after a boot's work), so the first quiet period trims too. It
// returns when ctx ends.
func WhenQuiet(ctx context.Context, opts QuietOptions) {
	if opts.Period <= 0 {
		opts.Period = 30 * time.Second
	}
	if opts.QuietBytes == 0 {
		opts.QuietBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	t := time.NewTicker(opts.Period)
	defer t.Stop()
	trimWhenQuiet(ctx, t.C, allocatedBytes, opts.QuietBytes, func() {
		if err := Trim(); err != nil {
			opts.Logger.Debug("memtrim: page out cold code", "err", err)
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		opts.Logger.Debug("memtrim: quiet, returned free memory", "heapInuseMiB", m.HeapInuse>>20, "sysMiB", m.Sys>>20, "releasedMiB", m.HeapReleased>>20)
	})
}

// trimWhenQuiet is WhenQuiet's loop: allocated is the process's running
// total of allocated bytes, read once per tick.
func trimWhenQuiet(ctx context.Context, ticks <-chan time.Time, allocated func() uint64, quietBytes uint64, trim func()) {
	q := quietness{last: allocated(), quietBytes: quietBytes}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			if q.trimNow(allocated()) {
				trim()
			}
		}
	}
}

// quietness follows the allocation total from period to period.
type quietness struct {
	last       uint64
	quietBytes uint64
	trimmed    bool // since the last busy period
}

// trimNow takes the total at the end of a period and says whether this
// period starts a quiet spell.
func (q *quietness) trimNow(total uint64) bool {
	busy := total-q.last >= q.quietBytes
	q.last = total
	if busy {
		q.trimmed = false
		return false
	}
	if q.trimmed {
		return false
	}
	q.trimmed = true
	return true
}

// allocatedBytes reads the runtime's allocation counter without stopping
// the world (runtime.ReadMemStats would).
func allocatedBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
