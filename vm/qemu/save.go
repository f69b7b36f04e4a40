package qemu

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/vmdock/vmdock/internal/atomicfile"
	"github.com/vmdock/vmdock/vm/driver"
	"github.com/vmdock/vmdock/vm/resume"
)

// stateFormat is QEMU's migration stream, zstd-compressed by vmdock. The
// stream's layout depends on the QEMU version and the command line, which
// the resume fingerprint covers.
const stateFormat = "qemu-migration+zstd"

// The state crosses a pipe vmdock owns in both directions, not QEMU's
// exec: migration: QEMU 7.2 kills an exec'd writer as soon as it closes
// the stream, which can cut the file short.
const (
	saveFDName = "vmdock-save"
	// incomingFD is where a resumed qemu reads its state (ExtraFiles[0]).
	incomingFD = 3
	// netFD is the VM's end of the host agent's network stack
	// (ExtraFiles[1]), the same whether the VM boots or resumes so the
	// command line the resume fingerprint covers does not change.
	netFD = 4
)

// Bounds of the save and the resume. A 2 GiB guest's used memory is
// written in seconds; the rest is margin for a loaded host.
const (
	saveTimeout    = 3 * time.Minute
	resumeLoadWait = 2 * time.Minute
)

var (
	_ driver.Saver   = (*Machine)(nil)
	_ driver.Resumer = (*Driver)(nil)
)

// SaveBlocker: QEMU refuses to migrate a guest with a mounted 9p export
// (in every version) or a vhost-user-fs device (unless its virtiofsd can
// migrate, which the daemons vmdock finds cannot).
func (d *Driver) SaveBlocker(spec driver.Spec) error {
	for _, s := range spec.Shares {
		return fmt.Errorf("QEMU cannot save a VM with a mounted %s share (%s); sync mounts (mode: sync) do not have this limit", s.Type, s.HostPath)
	}
	return nil
}

// Save pauses the guest, streams its state into path through zstd and
// quits qemu. On failure the guest is let run again.
func (m *Machine) Save(ctx context.Context, path string) (driver.SavedState, error) {
	if m.exited() {
		return driver.SavedState{}, errors.New("save: the VM is not running")
	}
	ctx, cancel := context.WithTimeout(ctx, saveTimeout)
	defer cancel()
	if err := m.qmp.execute(ctx, "stop", nil, nil); err != nil {
		return driver.SavedState{}, fmt.Errorf("save: pause the guest: %w", err)
	}
	saved, err := m.migrateTo(ctx, path)
	if err != nil {
		cctx, ccancel := context.WithTimeout(context.Background(), qmpDefaultTimeout)
		defer ccancel()
		if cerr := m.qmp.execute(cctx, "cont", nil, nil); cerr != nil && !m.exited() {
			m.log.Warn("save failed and the guest could not be resumed", "err", cerr)
		}
		return driver.SavedState{}, err
	}
	m.quit("QMP quit after the save failed; killing qemu")
	return saved, nil
}

// migrateTo runs QEMU's migration into a pipe whose other end is written,
// compressed, to path.
func (m *Machine) migrateTo(ctx context.Context, path string) (driver.SavedState, error) {
	// Unlimited: the guest is paused, so there is no downtime to bound, and
	// QEMU's default of 32 MiB/s would stretch a save to half a minute.
	if err := m.qmp.execute(ctx, "migrate-set-parameters", map[string]any{"max-bandwidth": int64(1) << 40}, nil); err != nil {
		return driver.SavedState{}, fmt.Errorf("save: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return driver.SavedState{}, fmt.Errorf("save: %w", err)
	}
	err = m.qmp.executeWithFile(ctx, "getfd", map[string]any{"fdname": saveFDName}, w)
	w.Close() // qemu holds its own copy now, or none
	if err != nil {
		r.Close()
		return driver.SavedState{}, fmt.Errorf("save: hand qemu the state pipe: %w", err)
	}
	type result struct {
		saved driver.SavedState
		err   error
	}
	written := make(chan result, 1)
	go func() {
		s, err := writeState(r, path)
		r.Close()
		written <- result{s, err}
	}()
	if err := m.qmp.execute(ctx, "migrate", map[string]any{"uri": "fd:" + saveFDName}, nil); err != nil {
		// The pipe is still registered with qemu: closing it there ends
		// the writer.
		_ = m.qmp.execute(context.Background(), "closefd", map[string]any{"fdname": saveFDName}, nil)
		res := <-written
		os.Remove(path)
		return driver.SavedState{}, fmt.Errorf("save: %w (%v)", err, res.err)
	}
	if err := m.waitMigration(ctx); err != nil {
		_ = m.qmp.execute(context.Background(), "migrate_cancel", nil, nil)
		select {
		case <-written:
		case <-time.After(quitGrace):
		}
		os.Remove(path)
		return driver.SavedState{}, fmt.Errorf("save: %w", err)
	}
	res := <-written // qemu closed its end when the migration completed
	if res.err != nil {
		os.Remove(path)
		return driver.SavedState{}, fmt.Errorf("save: %w", res.err)
	}
	res.saved.Hypervisor, res.saved.Accel, res.saved.Hardware = m.version, m.accel.Accel, m.hardware
	return res.saved, nil
}

// hardwareDigest identifies the virtual hardware of spec's VM on env: the
// sha256 of its command line without -incoming. QEMU loads a state only
// into the devices it was saved from, and a device vmdock adds or changes
// (a balloon, a new property) makes the load fail late, or worse, load
// into a subtly different machine; comparing digests first makes such a
// state a clean cold boot.
func hardwareDigest(spec driver.Spec, env HostEnv) (string, error) {
	env.incoming = false
	args, err := Args(spec, env)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(strings.Join(args, "\x00")))
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// waitMigration polls the outgoing migration until it completes.
func (m *Machine) waitMigration(ctx context.Context) error {
	for {
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := m.qmp.execute(ctx, "query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled", "cancelling":
			return fmt.Errorf("qemu's migration %s: %s", st.Status, st.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the migration did not complete: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeState compresses the migration stream from r into path (through a
// temporary file, so path is complete or absent).
func writeState(r io.Reader, path string) (driver.SavedState, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return driver.SavedState{}, fmt.Errorf("create state file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	defer tmp.Close()
	hw := &resume.HashingWriter{W: tmp}
	bw := bufio.NewWriterSize(hw, 1<<20)
	// The fastest level: most of a guest's memory compresses well even
	// so, and the save is on the user's time.
	enc, err := zstd.NewWriter(bw, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return driver.SavedState{}, err
	}
	if _, err := io.Copy(enc, r); err != nil {
		enc.Close()
		return driver.SavedState{}, fmt.Errorf("write state file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return driver.SavedState{}, fmt.Errorf("write state file: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return driver.SavedState{}, fmt.Errorf("write state file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return driver.SavedState{}, fmt.Errorf("write state file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return driver.SavedState{}, fmt.Errorf("write state file: %w", err)
	}
	if err := atomicfile.Commit(tmp.Name(), path); err != nil {
		return driver.SavedState{}, fmt.Errorf("write state file: %w", err)
	}
	return driver.SavedState{Format: stateFormat, Size: hw.Size(), SHA256: hw.SHA256()}, nil
}

// Resume starts qemu with the same command line plus -incoming, feeds it
// the decompressed state, and waits until the guest runs again.
func (d *Driver) Resume(ctx context.Context, plan driver.Plan, path string, saved driver.SavedState, accel string) (driver.Machine, error) {
	if saved.Format != stateFormat {
		return nil, fmt.Errorf("saved state format %q: this driver reads %q", saved.Format, stateFormat)
	}
	spec, env, bin, err := fromPlan(plan)
	if err != nil {
		return nil, err
	}
	if err := d.SaveBlocker(spec); err != nil {
		return nil, err
	}
	if saved.Hypervisor != env.Version.String() {
		return nil, fmt.Errorf("the state was saved by QEMU %s, this is QEMU %s", saved.Hypervisor, env.Version)
	}
	env.Accel = accel
	hw, err := hardwareDigest(spec, env)
	if err != nil {
		return nil, err
	}
	if saved.Hardware != hw {
		return nil, errors.New("the VM's virtual hardware changed since the save (another vmdock or QEMU configuration)")
	}
	env.incoming = true
	if err := CleanupOrphans(spec.Dir); err != nil {
		return nil, fmt.Errorf("clean up after the previous run: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open saved state: %w", err)
	}
	dec, err := zstd.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read saved state: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		dec.Close()
		f.Close()
		return nil, err
	}
	m, err := d.launch(ctx, spec, env, bin, accelChoice{Accel: accel}, []*os.File{r})
	r.Close() // qemu has its own copy, or failed
	fed := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, dec)
		w.Close()
		dec.Close()
		f.Close()
		fed <- err
	}()
	if err != nil {
		return nil, err
	}
	if err := m.waitIncoming(ctx, fed); err != nil {
		m.Stop(context.Background(), true)
		return nil, err
	}
	// The guest was paused for the save, and QEMU restores that run
	// state; the tests' BIOS-only VM stays paused.
	if !env.pausedBIOS {
		if err := m.qmp.execute(ctx, "cont", nil, nil); err != nil {
			m.Stop(context.Background(), true)
			return nil, fmt.Errorf("run the resumed guest: %w", err)
		}
	}
	return m, nil
}

// waitIncoming waits until qemu has loaded the state. QEMU exits by
// itself when it cannot load the stream.
func (m *Machine) waitIncoming(ctx context.Context, fed <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, resumeLoadWait)
	defer cancel()
	var feedErr error
	for {
		select {
		case <-m.done:
			if feedErr != nil {
				return fmt.Errorf("qemu could not load the saved state (%v): %s", feedErr, m.lastWords())
			}
			return fmt.Errorf("qemu could not load the saved state: %s", m.lastWords())
		case feedErr = <-fed:
			if feedErr != nil {
				return fmt.Errorf("read saved state: %w", feedErr)
			}
			fed = nil
			continue
		case <-ctx.Done():
			return fmt.Errorf("qemu did not finish loading the saved state within %s", resumeLoadWait)
		case <-time.After(50 * time.Millisecond):
		}
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := m.qmp.execute(ctx, "query-migrate", nil, &st); err != nil {
			continue // exited meanwhile: the next round says why
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("qemu could not load the saved state: %s %s", st.ErrorDesc, m.lastWords())
		}
	}
}
