package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/bench"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/resume"
	"github.com/vmdock/vmdock/vm/store"
)

// runResumeCycle measures fast start against a cold boot on one stopped
// instance, side by side: a cold start to docker-ready, a saving stop, a
// resuming start to docker-ready, and a powering-off stop. The instance
// ends stopped with no saved state.
func runResumeCycle(cmd *cobra.Command, inst *store.Instance, h config.Host, paths ...string) error {
	ctx := cmd.Context()
	cfg, err := inst.LoadConfig(h)
	if err != nil {
		return err
	}
	if !cfg.Resume {
		return fmt.Errorf("--resume-cycle: profile %q has resume: false", inst.Name)
	}
	lock, err := instance.Lock(ctx, inst)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if st := instance.Status(ctx, inst); st.State != instance.StateStopped {
		return fmt.Errorf("--resume-cycle: profile %q is %s; stop it first", inst.Name, st)
	}
	if err := resume.Remove(inst.SavedStateDir()); err != nil {
		return err
	}
	progress := cmd.ErrOrStderr()
	timed := func(what string, f func() error) (time.Duration, error) {
		fmt.Fprintf(progress, "resume cycle: %s\n", what)
		began := time.Now()
		if err := f(); err != nil {
			return 0, fmt.Errorf("--resume-cycle: %s: %w", what, err)
		}
		return time.Since(began), nil
	}
	quiet := instance.StartOptions{Progress: io.Discard}
	cold, err := timed("cold start", func() error { return startVM(ctx, inst, cfg, quiet) })
	if err != nil {
		return err
	}
	save, err := timed("stop (saves)", func() error { return stopVM(ctx, inst, instance.StopOptions{}) })
	if err != nil {
		return err
	}
	saved, err := resume.Load(inst.SavedStateDir())
	if err != nil {
		return fmt.Errorf("--resume-cycle: stop did not save the VM (`vmdock stop` says why; shares block it on qemu): %w", err)
	}
	resumed, err := timed("start (resumes)", func() error { return startVM(ctx, inst, cfg, quiet) })
	if err != nil {
		return err
	}
	if resume.Exists(inst.SavedStateDir()) {
		return errors.New("--resume-cycle: the start did not take the saved state (see `vmdock logs`)")
	}
	powerOff, err := timed("stop (powers off)", func() error { return stopVM(ctx, inst, instance.StopOptions{NoSave: true}) })
	if err != nil {
		return err
	}
	rows := []bench.Result{
		{Section: "boot", Metric: "start to docker ready", Variant: "cold boot", Value: cold.Seconds(), Unit: "s", Better: bench.Lower},
		{Section: "boot", Metric: "start to docker ready", Variant: "resume", Value: resumed.Seconds(), Unit: "s", Better: bench.Lower},
		{Section: "boot", Metric: "stop", Variant: "power off", Value: powerOff.Seconds(), Unit: "s", Better: bench.Lower},
		{Section: "boot", Metric: "stop", Variant: "save", Value: save.Seconds(), Unit: "s", Better: bench.Lower},
		{Section: "boot", Metric: "saved state (zstd)", Variant: fmt.Sprintf("%g GiB guest", cfg.MemoryGiB), Value: float64(saved.State.Size) / (1 << 20), Unit: "MiB", Better: bench.Info},
	}
	fmt.Fprintf(cmd.OutOrStdout(), "cold start %.1fs, resume %.1fs (%.2f of cold); stop: save %.1fs (state %.0f MiB), power off %.1fs\n",
		cold.Seconds(), resumed.Seconds(), resumed.Seconds()/cold.Seconds(), save.Seconds(), float64(saved.State.Size)/(1<<20), powerOff.Seconds())
	return appendRows(paths, rows)
}

// appendRows adds rows to the JSON report at each path (created if
// missing).
func appendRows(paths []string, rows []bench.Result) error {
	for _, p := range paths {
		if p == "" {
			continue
		}
		rep, err := loadReport(p)
		if err != nil {
			return err
		}
		if rep.Time == "" {
			rep.Time = time.Now().UTC().Format(time.RFC3339)
			rep.Machine = bench.HostMachine()
		}
		for _, r := range rows {
			rep.Add(r)
		}
		if err := bench.WriteJSON(p, rep); err != nil {
			return err
		}
	}
	return nil
}
