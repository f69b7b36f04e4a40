package migrate

import (
	"context"
	"fmt"
)

// Options say what Run moves and how.
type Options struct {
	Source, Target *Engine
	// Images, Volumes and Containers pick what moves; none set moves all.
	Images, Volumes, Containers bool
	// DryRun lists what would move and changes nothing.
	DryRun bool
	// StopSource stops the running source containers that use a volume
	// while it is copied, and starts them again.
	StopSource bool
	// Overwrite replaces a target volume with other contents and a tag
	// that names another image on the target.
	Overwrite bool
	// AllowPrivileged recreates containers that hold more than a plain
	// container does (privileged, devices, the VM's pid, ipc or uts
	// namespace, added capabilities, confinement turned off); without it
	// each is a failed item naming what it holds.
	AllowPrivileged bool
	// TargetFree, when set, tells the bytes free on the target's disk; a
	// copy whose size is known and does not fit is refused before it
	// starts.
	TargetFree func(context.Context) (int64, error)
	// RecordPath is the file (in the instance folder) that marks volume
	// copies begun and finished, so a run after a cut starts them again.
	RecordPath string
	// BindAllowed says whether a container may bind host folder path (one
	// the VM shares); nil allows every bind.
	BindAllowed func(path string) bool
	// Progress, when set, hears about each item as it starts, moves bytes
	// and ends.
	Progress func(Event)
}

// Results of an Item.
const (
	Copied  = "copied"  // moved by this run
	Present = "present" // already on the target
	Planned = "planned" // would move (dry run)
	Skipped = "skipped" // left out, Detail says why
	Failed  = "failed"  // could not move, Detail says why
)

// Item is one image, volume, network or container and what became of it.
type Item struct {
	Kind   string `json:"kind"` // image, volume, network, container
	Name   string `json:"name"`
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
}

// Event is progress: item Index of Total of Kind, with Bytes moved so
// far; Result is set once it is done.
type Event struct {
	Kind   string
	Name   string
	Index  int
	Total  int
	Bytes  int64
	Result string
	Detail string
}

// Report is every item of a run.
type Report struct {
	Items []Item `json:"items"`
}

// Count is how many items ended with result.
func (r Report) Count(result string) int {
	n := 0
	for _, it := range r.Items {
		if it.Result == result {
			n++
		}
	}
	return n
}

// Bytes is how many bytes the run moved.
func (r Report) Bytes() int64 {
	var n int64
	for _, it := range r.Items {
		n += it.Bytes
	}
	return n
}

// run is one Run's state.
type run struct {
	opts    Options
	report  Report
	record  *record
	source  *helpers
	target  *helpers
	srcCtrd bool              // the source keeps images in containerd
	dstCtrd bool              // the target keeps images in containerd
	nets    map[string]string // network name → result on the target
	stopped *stoppedSet       // source containers this run stopped
	// volumeSizes are the source's volume sizes, where known.
	volumeSizes map[string]int64
}

// Run moves what opts pick from opts.Source to opts.Target. Each item's
// fate is in the report; the error is for what stops the whole run (an
// engine that does not answer, a cancelled ctx, a source that is the
// target itself). Helper containers, also those a killed run left, are
// removed at the start and on every return, and the source containers the
// run stopped are started again.
func Run(ctx context.Context, opts Options) (Report, error) {
	if !opts.Images && !opts.Volumes && !opts.Containers {
		opts.Images, opts.Volumes, opts.Containers = true, true, true
	}
	rec, err := loadRecord(opts.RecordPath)
	if err != nil {
		return Report{}, err
	}
	r := &run{opts: opts, record: rec, source: &helpers{engine: opts.Source}, target: &helpers{engine: opts.Target},
		nets: map[string]string{}, stopped: &stoppedSet{engine: opts.Source}}
	if err := r.checkEngines(ctx); err != nil {
		return r.report, err
	}
	defer r.stopped.startAll(ctx)
	for _, h := range []*helpers{r.source, r.target} {
		h.removeAll(ctx)
		defer h.removeAll(ctx)
	}
	steps := []struct {
		on   bool
		step func(context.Context) error
	}{{opts.Images, r.images}, {opts.Volumes, r.volumes}, {opts.Containers, r.containers}}
	for _, s := range steps {
		if !s.on {
			continue
		}
		if err := s.step(ctx); err != nil {
			return r.report, err
		}
		if err := ctx.Err(); err != nil {
			return r.report, err
		}
	}
	return r.report, nil
}

// checkEngines reads both engines' info and refuses a source that is the
// target reached by another path (a hard link or bind of its socket, a
// forwarded socket): copying an engine into itself would replace its own
// volumes with themselves.
func (r *run) checkEngines(ctx context.Context) error {
	src, err := infoOf(ctx, r.opts.Source)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	dst, err := infoOf(ctx, r.opts.Target)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if src.ID != "" && src.ID == dst.ID {
		return fmt.Errorf("the source %s is the target engine itself (engine ID %s): name another engine to move from", r.opts.Source.Socket, src.ID)
	}
	r.srcCtrd, r.dstCtrd = src.containerdStore, dst.containerdStore
	return nil
}

// done records item and tells Progress.
func (r *run) done(it Item, index, total int) {
	r.report.Items = append(r.report.Items, it)
	r.progress(Event{Kind: it.Kind, Name: it.Name, Index: index, Total: total, Bytes: it.Bytes, Result: it.Result, Detail: it.Detail})
}

func (r *run) progress(ev Event) {
	if r.opts.Progress != nil {
		r.opts.Progress(ev)
	}
}

// failure is an item that failed with err, unless ctx was cancelled,
// which ends the run instead.
func (r *run) failure(ctx context.Context, it Item, err error, index, total int) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	it.Result, it.Detail = Failed, err.Error()
	r.done(it, index, total)
	return nil
}
