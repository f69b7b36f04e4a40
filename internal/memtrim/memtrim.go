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
	// Period is how often the process is looked at (default 30 s).
	Period time.Duration
	// QuietBytes: a period that allocated fewer bytes is quiet (default
	// 1 MiB; an idle host agent allocates a few KiB a minute for its
	// keepalives and clock checks). It is also how much the resident set
	// must have grown since the last trim for a quiet period to trim again.
	QuietBytes uint64
	Logger     *slog.Logger
}

// WhenQuiet trims on the first quiet period after the process grew: after
// a busy period, or once its resident set grew by QuietBytes since the last
// trim. The latter catches a burst that allocates little but pages the
// binary's code back in (an exec, a status call), which a count of page
// faults misses: the kernel maps up to 16 pages per fault. The process
// counts as grown when WhenQuiet starts (it runs after a boot's work). It
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
	q := quietness{lastAlloc: allocatedBytes(), quietBytes: opts.QuietBytes, grown: true}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !q.trimNow(allocatedBytes(), residentBytes()) {
			continue
		}
		if err := Trim(); err != nil {
			opts.Logger.Debug("memtrim: page out cold code", "err", err)
		}
		q.trimmed(residentBytes())
		if !opts.Logger.Enabled(ctx, slog.LevelDebug) {
			continue // ReadMemStats stops the world: only for a log someone reads
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		opts.Logger.Debug("memtrim: quiet, returned free memory", "heapInuseMiB", m.HeapInuse>>20, "sysMiB", m.Sys>>20, "releasedMiB", m.HeapReleased>>20, "residentMiB", q.residentAfterTrim>>20)
	}
}

// quietness follows a process from period to period.
type quietness struct {
	quietBytes        uint64
	lastAlloc         uint64 // allocation total at the last look
	residentAfterTrim uint64 // 0: unknown (not measured here, or no trim yet)
	grown             bool   // busy, or grown, since the last trim
}

// trimNow takes the allocation total and the resident size (0 where not
// known) at the end of a period, and says whether to trim now.
func (q *quietness) trimNow(alloc, resident uint64) bool {
	busy := alloc-q.lastAlloc >= q.quietBytes
	q.lastAlloc = alloc
	if busy {
		q.grown = true
		return false
	}
	if q.residentAfterTrim > 0 && resident >= q.residentAfterTrim+q.quietBytes {
		q.grown = true
	}
	return q.grown
}

// trimmed records a trim and the resident size right after it.
func (q *quietness) trimmed(resident uint64) {
	q.grown = false
	q.residentAfterTrim = resident
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
