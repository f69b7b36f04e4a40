package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vmdock/vmdock/network/loopback"
)

// StartOptions tune `vmdock start`.
type StartOptions struct {
	Progress io.Writer // step-by-step progress lines; nil discards
	// HostAgentArgs is the command that runs the host agent; default:
	// this executable with `hostagent --profile <name>`.
	HostAgentArgs []string
}

// DeleteOptions tune `vmdock delete`.
type DeleteOptions struct {
	Data  bool // also delete the data disk (docker images, volumes)
	Force bool // kill a running instance first
}

// ErrNotRunning is returned by commands that need a running instance.
var ErrNotRunning = errors.New("instance is not running")

// Start boots the instance (cfg already validated and saved, the caller
// holds the instance lock) and returns when Docker answers.
func Start(ctx context.Context, inst *Instance, cfg Config, opts StartOptions) error {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	if pid, ok := liveHostAgent(ctx, inst); ok {
		fmt.Fprintf(progress, "instance %q is already running (host agent pid %d)\n", inst.Name, pid)
		return activateContext(inst, cfg)
	}
	if err := cleanupStale(inst); err != nil {
		return err
	}
	pid, err := spawnHostAgent(inst, opts.HostAgentArgs)
	if err != nil {
		return err
	}
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

func spawnHostAgent(inst *Instance, args []string) (int, error) {
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
// fails, or it dies.
func followStart(ctx context.Context, inst *Instance, pid int, progress io.Writer) error {
	deadline := time.Now().Add(15 * time.Second)
	var resp *http.Response
	for {
		var err error
		resp, err = controlRequest(ctx, inst, http.MethodGet, ControlEventsPath, 0)
		if err == nil {
			break
		}
		if !processAlive(pid) || time.Now().After(deadline) {
			return startFailure(inst, "host agent", fmt.Errorf("host agent (pid %d) did not come up: %v", pid, err))
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	begun := map[string]time.Time{}
	n := 0
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue
		}
		switch ev.State {
		case "begin":
			n++
			begun[ev.Step] = time.Now()
			fmt.Fprintf(progress, "[%d] %s ...\n", n, ev.Step)
		case "done":
			fmt.Fprintf(progress, "    %s done (%s)\n", ev.Step, ev.Detail)
		case "note":
			fmt.Fprintf(progress, "    %s\n", ev.Detail)
		case "ready":
			fmt.Fprintf(progress, "instance %q is running; docker socket: %s\n", inst.Name, inst.DockerSocketPath())
			return nil
		case "failed":
			// The host agent is unwinding the boot: let it finish, so
			// nothing runs and status says Broken when start returns.
			waitPIDExit(pid, 30*time.Second)
			return startFailure(inst, ev.Step, errors.New(ev.Error))
		}
	}
	return startFailure(inst, "host agent", fmt.Errorf("host agent exited before the instance was ready"))
}

// startFailure names the failed step and shows the last lines of the logs a
// user needs to see to understand it.
func startFailure(inst *Instance, step string, err error) error {
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

// Stop powers the instance off gracefully (force: kill it now) and puts the
// previous docker context back.
func Stop(ctx context.Context, inst *Instance, force bool) error {
	defer restoreContext(inst)
	pid, ok := liveHostAgent(ctx, inst)
	if !ok {
		// Stopping a broken instance acknowledges the failure.
		if err := os.Remove(inst.BrokenPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("clear broken marker: %w", err)
		}
		return cleanupStale(inst)
	}
	q := 0
	if force {
		q = 1
	}
	resp, err := controlRequest(ctx, inst, http.MethodPost, ControlStopPath, q)
	if err != nil {
		return fmt.Errorf("ask host agent to stop: %w", err)
	}
	resp.Body.Close()
	timeout := 3 * time.Minute
	if force {
		timeout = 30 * time.Second
	}
	if waitPIDExit(pid, timeout) {
		return cleanupStale(inst)
	}
	// The host agent did not finish its own shutdown: end it; its VM goes
	// with it (tied by pdeathsig on Linux, found as an orphan elsewhere).
	syscall.Kill(pid, syscall.SIGKILL)
	waitPIDExit(pid, 10*time.Second)
	return cleanupStale(inst)
}

// Delete removes the instance; the data disk (docker images and volumes)
// stays unless opts.Data.
func Delete(ctx context.Context, inst *Instance, opts DeleteOptions) error {
	if _, ok := liveHostAgent(ctx, inst); ok {
		if !opts.Force {
			return fmt.Errorf("instance %q is running; stop it first or use --force", inst.Name)
		}
		if err := Stop(ctx, inst, true); err != nil {
			return err
		}
	}
	restoreContext(inst)
	removeContext(inst)
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
		keep["lock"] = true
	}
	var errs []error
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(inst.path(e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if opts.Data {
		if err := os.Remove(inst.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// liveHostAgent reports the host agent's pid when it is alive and answers
// on its control socket.
func liveHostAgent(ctx context.Context, inst *Instance) (int, bool) {
	st := inst.Status(ctx)
	return st.PID, st.State == StateRunning
}

// cleanupStale removes what a dead host agent left behind so a plain
// `start` recovers without --force. A live host agent that no longer
// answers is ended first.
func cleanupStale(inst *Instance) error {
	if pid, err := readPIDFile(inst.PIDPath()); err == nil && processAlive(pid) && isHostAgent(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		waitPIDExit(pid, 10*time.Second)
	}
	endOrphans(inst)
	for _, p := range []string{inst.PIDPath(), inst.ControlSocketPath(), inst.DockerSocketPath(), inst.AgentSocketPath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale %s: %w", p, err)
		}
	}
	return nil
}

func controlRequest(ctx context.Context, inst *Instance, method, path string, force int) (*http.Response, error) {
	url := "http://hostagent" + path
	if force == 1 {
		url += "?force=1"
	}
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	return ControlClient(inst.ControlSocketPath()).Do(req)
}

// HostAgentState asks a live host agent for its status.
func HostAgentState(ctx context.Context, inst *Instance) (*HostAgentStatus, error) {
	return QueryHostAgent(ctx, inst.ControlSocketPath())
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
