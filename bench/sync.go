package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/vmdock/vmdock/vm/driver"
)

// ScratchDisks hot-plugs disks into the running VM, each flushing as the
// boot disks do under one --disk-sync mode (bench/scratch's client).
type ScratchDisks interface {
	Attach(ctx context.Context, slot int, diskSync string) (serial string, err error)
	Detach(ctx context.Context, slot int) error
}

// syncModes in report order: none first, as the baseline the others are
// a fraction of.
var syncModes = []string{driver.DiskSyncNone, driver.DiskSyncFsync, driver.DiskSyncFull}

const (
	MetricSyncWrite  = "4k write+fsync"
	MetricSyncCommit = "db commit (512B record+fdatasync, 64B marker+fdatasync)"
)

// syncMount is where the scratch disk of a mode is mounted in the guest;
// /run is tmpfs, so nothing of it outlives the VM.
const syncMount = "/run/vmdock-bench-sync"

type syncDisk struct {
	slot     int
	mode     string
	serial   string
	mnt      string
	attached bool
	mounted  bool
}

// syncSizes are the interleaved rounds and, per round and mode, the 4 KiB
// synchronous writes and the database transactions.
func (r *runner) syncSizes() (rounds, writes, txs int) {
	if r.opt.Quick {
		return 3, 100, 40
	}
	return 5, 200, 100
}

// sync compares the --disk-sync modes inside one boot: one scratch disk
// per mode is hot-plugged into the running VM with that mode's cache
// behaviour, and the same small synchronous workloads run on each in
// interleaved rounds, so noise of the machine hits all modes alike.
// Comparing separate boots measured the boots, not the knob.
func (r *runner) sync(ctx context.Context) error {
	if r.env.Scratch == nil {
		return errors.New(orDefault(r.env.NoScratch, "the VM cannot take scratch disks"))
	}
	disks := make([]*syncDisk, len(syncModes))
	for i, mode := range syncModes {
		disks[i] = &syncDisk{slot: i, mode: mode, mnt: path.Join(syncMount, mode)}
	}
	defer r.releaseSyncDisks(disks)
	for _, d := range disks {
		if err := r.prepareSyncDisk(ctx, d); err != nil {
			return err
		}
	}
	src := path.Join(syncMount, "src.bin")
	rounds, writes, txs := r.syncSizes()
	// Random data: QEMU turns zero writes into discards (detect-zeroes).
	if _, err := r.sh(ctx, fmt.Sprintf("dd if=/dev/urandom of=%s bs=4k count=%d 2>&1", src, writes)); err != nil {
		return err
	}
	write, commit := newTallies(), newTallies()
	for round := 0; round < rounds; round++ {
		for k := range disks {
			// Rotate who goes first, so no mode always follows another.
			d := disks[(round+k)%len(disks)]
			if err := r.syncWriteRound(ctx, d, src, writes, write); err != nil {
				return err
			}
			if r.helper == "" {
				continue
			}
			if err := r.commitRound(ctx, d, txs, commit); err != nil {
				return err
			}
		}
	}
	for _, res := range syncRows(write, MetricSyncWrite, "ops/s") {
		r.rep.Add(res)
	}
	if r.helper == "" {
		r.rep.Skipped = append(r.rep.Skipped, "sync "+MetricSyncCommit+": needs the guest helper (see the helper line)")
		return nil
	}
	for _, res := range syncRows(commit, MetricSyncCommit, "tx/s") {
		r.rep.Add(res)
	}
	return nil
}

// prepareSyncDisk attaches the mode's disk, finds it in the guest by its
// serial (hot-plug is asynchronous), formats and mounts it. The whole
// journal and inode tables are written now, so no lazy init runs in the
// background of the measurement.
func (r *runner) prepareSyncDisk(ctx context.Context, d *syncDisk) error {
	serial, err := r.env.Scratch.Attach(ctx, d.slot, d.mode)
	if err != nil {
		return err
	}
	d.serial, d.attached = serial, true
	script := fmt.Sprintf(`set -e
dev=
for i in $(seq 1 150); do
	for b in /sys/block/vd*; do
		if [ "$(cat "$b/serial" 2>/dev/null)" = %[1]s ]; then dev=/dev/${b##*/}; fi
	done
	if [ -n "$dev" ] && [ -b "$dev" ]; then break; fi
	sleep 0.2
done
if [ -z "$dev" ]; then echo "no disk with serial "%[1]s" appeared in the guest within 30s" >&2; exit 1; fi
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
mkdir -p %[2]s
mount "$dev" %[2]s
echo "$dev"`, shq(serial), shq(d.mnt))
	out, err := r.sh(ctx, script)
	if err != nil {
		return fmt.Errorf("scratch disk for disk-sync %s: %w", d.mode, err)
	}
	d.mounted = true
	slog.Debug("sync scratch disk ready", "mode", d.mode, "dev", strings.TrimSpace(out))
	return nil
}

// releaseSyncDisks unmounts and detaches whatever prepare got to; it runs
// after a cancelled bench too, so it has its own time budget.
func (r *runner) releaseSyncDisks(disks []*syncDisk) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, d := range disks {
		if d.mounted {
			if _, err := r.sh(ctx, "umount "+shq(d.mnt)); err != nil {
				r.rep.Skipped = append(r.rep.Skipped, fmt.Sprintf("sync: unmount the disk-sync %s scratch disk: %v", d.mode, err))
			}
		}
		if d.attached {
			if err := r.env.Scratch.Detach(ctx, d.slot); err != nil {
				r.rep.Skipped = append(r.rep.Skipped, "sync: "+err.Error())
			}
		}
	}
	_, _ = r.sh(ctx, "rm -rf "+shq(syncMount))
}

func (r *runner) syncWriteRound(ctx context.Context, d *syncDisk, src string, writes int, t tallies) error {
	f := path.Join(d.mnt, "sync.bin")
	out, err := r.sh(ctx, fmt.Sprintf("dd if=%s of=%s bs=4k count=%d oflag=dsync 2>&1; rc=$?; rm -f %s; exit $rc", shq(src), shq(f), writes, shq(f)))
	if err != nil {
		return fmt.Errorf("disk-sync %s: %w", d.mode, err)
	}
	n, secs, err := parseDD(out)
	if err != nil {
		return err
	}
	t.add(d.mode, float64(n)/4096, secs)
	return nil
}

func (r *runner) commitRound(ctx context.Context, d *syncDisk, txs int, t tallies) error {
	var res struct{ Seconds float64 }
	if err := r.helperJSON(ctx, &res, "commits", "-dir", d.mnt, "-n", strconv.Itoa(txs)); err != nil {
		return fmt.Errorf("disk-sync %s: %w", d.mode, err)
	}
	t.add(d.mode, float64(txs), res.Seconds)
	return nil
}

// tally sums the operations and seconds of one mode's rounds and keeps
// each round's rate for the spread.
type tally struct {
	ops, secs float64
	rates     []float64
}

type tallies map[string]*tally

func newTallies() tallies { return tallies{} }

func (t tallies) add(mode string, ops, secs float64) {
	x := t[mode]
	if x == nil {
		x = &tally{}
		t[mode] = x
	}
	x.ops += ops
	x.secs += secs
	if secs > 0 {
		x.rates = append(x.rates, ops/secs)
	}
}

// syncRows are one row per mode in syncModes order: the rate over all
// rounds, with the slowest and fastest round in the note.
func syncRows(t tallies, metric, unit string) []Result {
	var out []Result
	for _, mode := range syncModes {
		x := t[mode]
		if x == nil || x.secs <= 0 {
			continue
		}
		lo, hi := math.Inf(1), 0.0
		for _, v := range x.rates {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		out = append(out, Result{
			Section: "sync", Metric: metric, Variant: "disk-sync " + mode,
			Value: x.ops / x.secs, Unit: unit, Better: Higher,
			Note: fmt.Sprintf("%d rounds, %s to %s %s", len(x.rates), formatValue(lo), formatValue(hi), unit),
		})
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
