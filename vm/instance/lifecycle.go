package instance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vmdock/vmdock/internal/fsutil"
	"github.com/vmdock/vmdock/network/loopback"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/logfile"
	"github.com/vmdock/vmdock/vm/store"
)

// StartOptions tune `vmdock start`.
type StartOptions struct {
	Progress io.Writer // step-by-step progress lines; nil discards
	// HostAgentArgs is the command that runs the host agent; default:
	// this executable with `hostagent --profile <name>`.
	HostAgentArgs []string
}

// StopOptions tune `vmdock stop`.
type StopOptions struct {
	Force    bool      // kill the VM without a graceful power-off
	NoSave   bool      // power off even when the instance saves on stop (resume)
	Progress io.Writer // how the guest went down; nil discards
}

// DeleteOptions tune `vmdock delete`.
type DeleteOptions struct {
	Data     bool      // also delete the data disk (docker images, volumes)
	Force    bool      // kill a running instance first
	Progress io.Writer // what was kept and why; nil discards
}

// ErrNotRunning is returned by commands that need a running instance.
var ErrNotRunning = errors.New("instance is not running")

// Start boots the instance (cfg already validated and saved, the caller
// holds the instance lock) and returns when Docker answers. A host agent
// that is still booting (its start was interrupted) is followed, not
// started twice.
func Start(ctx context.Context, inst *store.Instance, cfg config.Config, opts StartOptions) error {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	st := Status(ctx, inst)
	switch st.State {
	case StateRunning:
		fmt.Fprintf(progress, "instance %q is already running (host agent pid %d)\n", inst.Name, st.PID)
		return activateContext(inst, cfg)
	case StateStarting:
		fmt.Fprintf(progress, "instance %q is already starting (host agent pid %d, step %s); following its boot\n", inst.Name, st.PID, st.HostAgent.Step)
		return finishStart(ctx, inst, cfg, st.PID, progress)
	case StateStopping:
		fmt.Fprintf(progress, "instance %q is stopping (host agent pid %d); waiting for it to finish\n", inst.Name, st.PID)
		if !waitPIDExitCtx(ctx, st.PID, 3*time.Minute) {
			return fmt.Errorf("instance %q is still stopping (host agent pid %d); try again when `vmdock status -p %s` says Stopped", inst.Name, st.PID, inst.Name)
		}
	}
	if err := cleanupStale(inst); err != nil {
		return err
	}
	rotateLogs(inst)
	pid, err := spawnHostAgent(inst, opts.HostAgentArgs)
	if err != nil {
		return err
	}
	return finishStart(ctx, inst, cfg, pid, progress)
}

// finishStart follows the host agent's boot, then does the host-side
// steps that need the user's environment (alias, docker context).
func finishStart(ctx context.Context, inst *store.Instance, cfg config.Config, pid int, progress io.Writer) error {
	if err := followStart(ctx, inst, pid, progress); err != nil {
		return err
	}
	if cfg.Network.LoopbackAlias {
		// The alias outlives the instance: the IDE setting that uses it
		// should not break on every stop. `vmdock loopback-alias remove`
		// takes it away.
		m := loopback.NewManager(filepath.Dir(inst.Dir), progress)
		if err := m.Add(ctx, cfg.Network.LoopbackAliasIP, false); err != nil {
			return fmt.Errorf("loopback alias %s: %w", cfg.Network.LoopbackAliasIP, err)
		}
	}
	return activateContext(inst, cfg)
}

// activateContext switches the docker context to a docker instance. A
// containerd instance has no docker endpoint, so the user's current
// context stays as it is.
func activateContext(inst *store.Instance, cfg config.Config) error {
	if cfg.Runtime != config.RuntimeDocker {
		return nil
	}
	return inst.DockerContext().Activate(cfg.Activate)
}

// rotateLogs caps the logs a boot appends to before it starts writing.
func rotateLogs(inst *store.Instance) {
	for _, p := range []string{inst.HostAgentLogPath(), inst.SerialLogPath(), inst.GuestAgentLogPath()} {
		if err := logfile.Rotate(p, logfile.MaxSize); err != nil {
			slog.Warn("rotate log", "err", err)
		}
	}
}

func spawnHostAgent(inst *store.Instance, args []string) (int, error) {
	if len(args) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return 0, fmt.Errorf("find vmdock executable: %w", err)
		}
		args = []string{exe, "hostagent", "--profile", inst.Name}
	}
	logf, err := os.OpenFile(inst.HostAgentLogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("host agent log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = inst.Dir
	// Its own session: closing the terminal that ran `vmdock start` must
	// not take the VM down.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start host agent: %w", err)
	}
	go cmd.Wait() // reap it if it dies while we follow
	return cmd.Process.Pid, nil
}

// followStart prints the host agent's boot events until it is ready, it
// fails, or it dies. Interrupting it (Ctrl-C) leaves the boot running in
// the background, and says so.
func followStart(ctx context.Context, inst *store.Instance, pid int, progress io.Writer) error {
	deadline := time.Now().Add(15 * time.Second)
	client := control.NewClient(inst.ControlSocketPath())
	var events *control.EventStream
	for {
		var err error
		events, err = client.Events(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return interrupted(inst, pid)
		}
		if !processAlive(pid) || time.Now().After(deadline) {
			return startFailure(inst, "host agent", fmt.Errorf("host agent (pid %d) did not come up: %v", pid, err))
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer events.Close()
	n := 0
	for {
		ev, err := events.Next()
		if err != nil {
			break
		}
		switch ev.State {
		case control.EventBegin:
			n++
			fmt.Fprintf(progress, "[%d] %s ...\n", n, ev.Step)
		case control.EventDone:
			fmt.Fprintf(progress, "    %s done (%s)\n", ev.Step, ev.Detail)
		case control.EventNote:
			fmt.Fprintf(progress, "    %s\n", ev.Detail)
		case control.EventReady:
			if st, err := control.NewClient(inst.ControlSocketPath()).Status(ctx); err == nil && st.Runtime == config.RuntimeContainerd {
				fmt.Fprintf(progress, "instance %q is running; containerd socket: %s (nerdctl: `vmdock nerdctl -p %s -- ps`)\n", inst.Name, st.RuntimeSocket, inst.Name)
			} else {
				fmt.Fprintf(progress, "instance %q is running; docker socket: %s\n", inst.Name, inst.DockerSocketPath())
			}
			return nil
		case control.EventFailed:
			// The host agent is unwinding the boot: let it finish, so
			// nothing runs and status says Broken when start returns.
			waitPIDExit(pid, 30*time.Second)
			if !fsutil.Exists(inst.BrokenPath()) && strings.Contains(ev.Error, context.Canceled.Error()) {
				return fmt.Errorf("instance %q was stopped (`vmdock stop`) before it was ready", inst.Name)
			}
			return startFailure(inst, ev.Step, errors.New(ev.Error))
		}
	}
	if ctx.Err() != nil && processAlive(pid) {
		return interrupted(inst, pid)
	}
	waitPIDExit(pid, 5*time.Second)
	reason := "host agent exited before the instance was ready"
	if b, err := os.ReadFile(inst.BrokenPath()); err == nil {
		reason += ": " + strings.TrimSpace(string(b))
	}
	return startFailure(inst, "host agent", errors.New(reason))
}

// interrupted is what an interrupted start tells: the host agent runs in
// its own session, so the boot goes on, and the user needs to know how to
// reach it.
func interrupted(inst *store.Instance, pid int) error {
	p := inst.Name
	return fmt.Errorf("interrupted; the boot of %q goes on in the background (host agent pid %d)\n"+
		"follow it: `vmdock status -p %s` or `vmdock logs -p %s -f`\n"+
		"wait for it and switch the docker context: `vmdock start -p %s`\n"+
		"end it: `vmdock stop -p %s`", p, pid, p, p, p, p)
}

// startFailure names the failed step and shows the last lines of the logs a
// user needs to see to understand it.
func startFailure(inst *store.Instance, step string, err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "start failed at step %q: %v", step, err)
	for _, f := range []struct{ name, path string }{
		{"serial console", inst.SerialLogPath()},
		{"host agent", inst.HostAgentLogPath()},
	} {
		if tail := tailFile(f.path, 15); tail != "" {
			fmt.Fprintf(&b, "\n--- last lines of the %s log (%s) ---\n%s", f.name, f.path, tail)
		}
	}
	return errors.New(b.String())
}

// Stop powers the instance off gracefully (opts.Force: kill it now) and
// puts the previous docker context back. It says how the guest went down:
// through the guest agent, the ACPI power button, or forced.
func Stop(ctx context.Context, inst *store.Instance, opts StopOptions) error {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	defer inst.DockerContext().Restore()
	pid, ok := liveHostAgent(ctx, inst)
	if !ok {
		// Stopping a broken instance acknowledges the failure.
		if err := os.Remove(inst.BrokenPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("clear broken marker: %w", err)
		}
		return cleanupStale(inst)
	}
	// Follow the events before asking, so the stop's own event is not missed.
	client := control.NewClient(inst.ControlSocketPath())
	how := make(chan string, 1)
	if events, err := client.Events(ctx); err == nil {
		go func() {
			defer events.Close()
			how <- stopPath(events, progress)
		}()
	} else {
		how <- ""
	}
	if err := client.Stop(ctx, control.StopRequest{Force: opts.Force, NoSave: opts.NoSave}); err != nil {
		return err
	}
	timeout := 3 * time.Minute
	if opts.Force {
		timeout = 30 * time.Second
	}
	if !waitPIDExit(pid, timeout) {
		// The host agent did not finish its own shutdown: end it; its VM
		// goes with it (tied by pdeathsig on Linux, found as an orphan
		// elsewhere).
		fmt.Fprintf(progress, "the host agent (pid %d) did not finish its shutdown in %s; killed it\n", pid, timeout)
		syscall.Kill(pid, syscall.SIGKILL)
		waitPIDExit(pid, 10*time.Second)
	}
	select {
	case p := <-how:
		if text, ok := stopPaths[p]; ok {
			fmt.Fprintln(progress, text)
		}
	case <-time.After(2 * time.Second):
	}
	return cleanupStale(inst)
}

// stopPaths say what each stop path means, for `vmdock stop`.
var stopPaths = map[string]string{
	control.StopByAgent:    "the guest agent powered the guest off",
	control.StopByACPI:     "the guest powered off on the ACPI power button",
	control.StopByForce:    "the VM was ended (forced)",
	control.StopBySelf:     "the guest had powered itself off",
	control.StopDuringBoot: "the boot was stopped and undone",
	control.StopBySave:     "the VM was saved; the next start resumes it (`start --cold` boots afresh)",
	control.StopRemote:     "the ssh session to the server was closed; the server's containers keep running",
	control.StopBySettle:   "the guest stopped its container runtimes and flushed its disks; the VM was ended (a share it could not unmount)",
}

// stopPath reads the host agent's events until its stop event, printing
// the notes of the stop on the way, and returns the path it took.
func stopPath(events *control.EventStream, progress io.Writer) string {
	for {
		ev, err := events.Next()
		if err != nil {
			return ""
		}
		if ev.Step != "stop" {
			continue
		}
		switch ev.State {
		case control.EventNote:
			fmt.Fprintf(progress, "%s\n", ev.Detail)
		case control.EventStopped:
			return ev.Detail
		}
	}
}

// Delete removes the instance; the data disk (docker images and volumes)
// stays unless opts.Data. Only files vmdock makes are removed: a file it
// does not know keeps the folder in place, and a symlinked instance folder
// is refused outright, since deleting through it would empty its target.
func Delete(ctx context.Context, inst *store.Instance, opts DeleteOptions) error {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	if err := CheckDelete(inst); err != nil {
		return err
	}
	if _, ok := liveHostAgent(ctx, inst); ok {
		if !opts.Force {
			return fmt.Errorf("instance %q is running; stop it first or use --force", inst.Name)
		}
		if err := Stop(ctx, inst, StopOptions{Force: true}); err != nil {
			return err
		}
	}
	inst.DockerContext().Restore()
	inst.DockerContext().Remove()
	entries, err := os.ReadDir(inst.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", inst.Dir, err)
	}
	keep := map[string]bool{}
	if !opts.Data {
		keep["data.raw"] = true
		keep[filepath.Base(inst.DataRuntimePath())] = true
		keep["lock"] = true
	}
	var errs []error
	var unknown []string
	for _, e := range entries {
		switch {
		case keep[e.Name()]:
		case e.IsDir() && store.IsInstanceDir(e.Name()):
			// The sync engine's own state: never a user's files (those are
			// in the host folders it syncs, which delete does not touch).
			if err := os.RemoveAll(filepath.Join(inst.Dir, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", filepath.Join(inst.Dir, e.Name()), err))
			}
		case e.IsDir() || !store.IsInstanceFile(e.Name()):
			unknown = append(unknown, e.Name())
		default:
			if err := os.Remove(filepath.Join(inst.Dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("delete %s: %w", filepath.Join(inst.Dir, e.Name()), err))
			}
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(progress, "kept %s: it holds files vmdock did not make: %s\n", inst.Dir, strings.Join(unknown, ", "))
	} else if opts.Data {
		if err := os.Remove(inst.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckDelete refuses an instance whose folder is a symbolic link:
// deleting through it would empty the link's target. The CLI asks before
// it takes the lock, which would create a file there.
func CheckDelete(inst *store.Instance) error {
	fi, err := os.Lstat(inst.Dir)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	target, _ := os.Readlink(inst.Dir)
	return fmt.Errorf("instance folder %s is a symbolic link (to %s); vmdock does not delete through it: remove the link and its files yourself", inst.Dir, target)
}

// liveHostAgent reports the host agent's pid when it is alive and answers
// on its control socket.
func liveHostAgent(ctx context.Context, inst *store.Instance) (int, bool) {
	st := Status(ctx, inst)
	switch st.State {
	case StateRunning, StateStarting, StateStopping:
		return st.PID, true
	}
	return st.PID, false
}

// cleanupStale removes what a dead host agent left behind so a plain
// `start` recovers without --force. A live host agent that no longer
// answers is ended first.
func cleanupStale(inst *store.Instance) error {
	if pid, err := store.ReadPID(inst.PIDPath()); err == nil && processAlive(pid) {
		if ours, why := isOwnHostAgent(inst, pid, inst.PIDPath()); ours {
			slog.Info("ending the instance's unresponsive host agent", "pid", pid)
			syscall.Kill(pid, syscall.SIGKILL)
			waitPIDExit(pid, 10*time.Second)
		} else {
			slog.Info("stale pid file names another process; leaving it alone", "reason", why)
		}
	}
	endOrphans(inst)
	for _, p := range []string{inst.PIDPath(), inst.ControlSocketPath(), inst.DockerSocketPath(), inst.ContainerdSocketPath(), inst.AgentSocketPath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale %s: %w", p, err)
		}
	}
	return nil
}

// HostAgentState asks a live host agent for its status.
func HostAgentState(ctx context.Context, inst *store.Instance) (*control.Status, error) {
	return control.NewClient(inst.ControlSocketPath()).Status(ctx)
}

func waitPIDExit(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !processAlive(pid) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return !processAlive(pid)
}

// waitPIDExitCtx is waitPIDExit that also ends with ctx.
func waitPIDExitCtx(ctx context.Context, pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if !processAlive(pid) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return !processAlive(pid)
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
