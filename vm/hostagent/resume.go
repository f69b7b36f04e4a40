package hostagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/agentbin"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/resume"
)

// resumeAnswerTimeout bounds the wait for a resumed guest's agent: it was
// running a moment ago (as the guest sees it), so a long silence means
// the state is no good and a cold boot is quicker than waiting.
const resumeAnswerTimeout = 15 * time.Second

// stepSavedState decides between resuming and a cold boot, before any
// step can change the disks the saved state depends on. A state that is
// not resumed is dropped: the cold boot makes it stale.
func (ha *hostAgent) stepSavedState(context.Context) error {
	dir := ha.inst.SavedStateDir()
	if !resume.Exists(dir) {
		return resume.Remove(dir) // a save cut short leaves a partial file
	}
	var why string
	switch {
	case !ha.cfg.Resume:
		why = "resume is off"
	case ha.boot.upgradeImage:
		why = "the root disk is remade from a new image (--upgrade-image)"
	default:
		fp, err := ha.fingerprint()
		if err != nil {
			why = err.Error()
			break
		}
		ha.boot.resumeFrom, why = resume.Decide(dir, fp)
	}
	if ha.boot.resumeFrom != nil {
		ha.events.Emit("saved-state", control.EventNote, "", fmt.Sprintf("resuming the VM saved %s (%s)", ha.boot.resumeFrom.At.Local().Format(time.DateTime), humanBytes(ha.boot.resumeFrom.State.Size)))
		return nil
	}
	ha.events.Emit("saved-state", control.EventNote, "", "not resuming the saved VM: "+why+"; booting cold")
	return resume.Remove(dir)
}

// fingerprint describes the VM this start would run, for comparison with
// a saved state's. The disks are marked as they are now.
func (ha *hostAgent) fingerprint() (resume.Fingerprint, error) {
	bin, err := agentbin.Binary(ha.cfg.Arch)
	if err != nil {
		return resume.Fingerprint{}, err
	}
	agentSum := sha256.Sum256(bin)
	specJSON, err := json.Marshal(ha.boot.spec)
	if err != nil {
		return resume.Fingerprint{}, err
	}
	specSum := sha256.Sum256(specJSON)
	mountsJSON, err := json.Marshal(struct {
		Shares []mounts.Share
		Syncs  []mounts.Sync
	}{ha.boot.spec.Shares, mounts.Syncs(ha.cfg.Mounts)})
	if err != nil {
		return resume.Fingerprint{}, err
	}
	caCerts, proxyHash := ha.boot.corp.fingerprint()
	return resume.Fingerprint{
		CACerts:   caCerts,
		Proxy:     proxyHash,
		Vmdock:    agent.Version,
		Agent:     "sha256:" + hex.EncodeToString(agentSum[:]),
		Image:     ha.boot.img.Digest,
		Driver:    ha.cfg.VMType,
		Arch:      ha.boot.spec.Arch,
		CPUs:      ha.boot.spec.CPUs,
		MemoryMiB: ha.boot.spec.MemoryMiB,
		DiskGiB:   ha.cfg.DiskGiB,
		Network:   ha.boot.spec.Network,
		DiskSync:  ha.boot.spec.DiskSync,
		Runtime:   ha.cfg.Runtime,
		Mounts:    string(mountsJSON),
		Spec:      hex.EncodeToString(specSum[:]),
		Disks:     resume.MarkDisks(ha.inst.DiskPath(), ha.inst.DataDiskPath()),
	}, nil
}

// resumeVM starts the VM from the saved state. On failure nothing runs
// and the disks are as the save left them.
func (ha *hostAgent) resumeVM(ctx context.Context) error {
	r, ok := ha.boot.driver.(driver.Resumer)
	if !ok {
		return fmt.Errorf("the %s driver cannot resume a saved VM", ha.boot.driver.Name())
	}
	console := newConsoleWatch(ha.boot.spec.SerialLog, ha.opts.BootSilence)
	saved := ha.boot.resumeFrom
	start := time.Now()
	plan, err := ha.withNetStack(ha.boot.plan)
	if err != nil {
		return err
	}
	m, err := r.Resume(ctx, plan, resume.StatePath(ha.inst.SavedStateDir()), saved.State, saved.State.Accel)
	if err != nil {
		ha.closeNetStack()
		return err
	}
	slog.Info("VM resumed from its saved state", "took", time.Since(start).Round(time.Millisecond), "saved", saved.At)
	// The guest runs again and will write its disks: the state is stale
	// from now on, whatever happens next (a crash of this host agent
	// must not lead to a second resume of it).
	if err := resume.Remove(ha.inst.SavedStateDir()); err != nil {
		slog.Warn("drop the resumed state", "err", err)
	}
	ha.watchConsole(console, m)
	ha.mu.Lock()
	ha.run.machine = m
	ha.mu.Unlock()
	ha.boot.resumed = true
	return nil
}

// endResumedVM kills a resumed VM whose guest does not answer. Killing is
// safe: the guest's file systems were flushed before the save, and
// nothing it did since reached the disks in a way a cold boot cannot
// replay (the journal).
func (ha *hostAgent) endResumedVM(ctx context.Context) {
	ha.mu.Lock()
	m := ha.run.machine
	ha.run.machine = nil
	ha.mu.Unlock()
	if m != nil {
		m.Stop(ctx, true)
	}
	ha.boot.resumed = false
}

// bootColdInstead drops the saved state, says why, and does the steps the
// resume skipped, then boots.
func (ha *hostAgent) bootColdInstead(ctx context.Context, why string) error {
	slog.Warn("resume failed; booting cold", "reason", why)
	ha.events.Emit("vm", control.EventNote, "", "could not resume the saved VM: "+why+"; booting cold")
	ha.boot.resumeFrom = nil
	if err := resume.Remove(ha.inst.SavedStateDir()); err != nil {
		return err
	}
	if err := ha.stepDisks(ctx); err != nil {
		return err
	}
	if err := ha.stepBootDisk(ctx); err != nil {
		return err
	}
	return ha.startVM(ctx)
}

// saveVM saves the running VM for the next start, after the guest flushed
// its file systems. It reports false, with a note saying why, when the VM
// was not saved and must be powered off instead.
func (ha *hostAgent) saveVM(ctx context.Context, m driver.Machine, c *agent.Client) bool {
	if !ha.cfg.Resume {
		return false
	}
	saver, canSave := m.(driver.Saver)
	r, canResume := ha.boot.driver.(driver.Resumer)
	if !canSave || !canResume {
		slog.Info("not saving the VM: the driver cannot resume one", "driver", ha.boot.driver.Name())
		return false
	}
	if err := r.SaveBlocker(ha.boot.spec); err != nil {
		ha.stopNote("not saved for a fast start: " + err.Error())
		return false
	}
	if err := guestSync(ctx, c, ha.opts.StopTimeout); err != nil {
		ha.stopNote(fmt.Sprintf("not saved for a fast start: the guest did not flush its file systems (%v)", err))
		return false
	}
	dir := ha.inst.SavedStateDir()
	if err := resume.Remove(dir); err != nil {
		ha.stopNote("not saved for a fast start: " + err.Error())
		return false
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		ha.stopNote("not saved for a fast start: " + err.Error())
		return false
	}
	start := time.Now()
	st, err := saver.Save(ctx, resume.StatePath(dir))
	if err != nil {
		resume.Remove(dir)
		ha.stopNote(fmt.Sprintf("not saved for a fast start: %v", err))
		return false
	}
	took := time.Since(start)
	// The VM has exited: the disks' marks are final.
	fp, err := ha.fingerprint()
	if err == nil {
		err = (&resume.Saved{Fingerprint: fp, State: st, At: time.Now(), Took: took}).Write(dir)
	}
	if err != nil {
		// The guest is gone; without a record the next start boots cold.
		resume.Remove(dir)
		ha.stopNote(fmt.Sprintf("the VM was saved but its record could not be written (%v); the next start boots cold", err))
		return true
	}
	ha.stopNote(fmt.Sprintf("saved the VM for a fast start: %s in %s", humanBytes(st.Size), took.Round(100*time.Millisecond)))
	return true
}

// guestSync flushes the guest's file systems, so the disks hold a
// consistent state whatever the next start does with the saved one.
func guestSync(ctx context.Context, c *agent.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, err := c.Exec(ctx, agent.ExecRequest{Argv: []string{"sync"}}, nil, io.Discard, io.Discard, nil)
	if err != nil {
		return err
	}
	if code != 0 {
		return errors.New("sync exited with status " + fmt.Sprint(code))
	}
	return nil
}

// humanBytes is n in MiB or GiB, for one-line notes.
func humanBytes(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
