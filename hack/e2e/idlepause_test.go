//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
)

// idleNow is the part of `vmdock status --json` the idle pause checks read.
type idleNow struct {
	Idle struct {
		After      string   `json:"after"`
		Paused     bool     `json:"paused"`
		Pauses     int      `json:"pauses"`
		LastWakeMs *float64 `json:"lastWakeMs"`
	} `json:"idle"`
	AgentSessions int `json:"agentSessions"`
	Machine       struct {
		PID int `json:"pid"`
	} `json:"machine"`
}

func (e *env) idleNow(t *testing.T) idleNow {
	t.Helper()
	var st struct {
		HostAgent *idleNow `json:"hostAgent"`
	}
	out := e.run(time.Minute, e.vmdock, "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.HostAgent == nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return *st.HostAgent
}

// waitPause waits until the VM is paused for the pauses-th time; status
// is answered by the host agent alone, so asking does not wake it.
func (e *env) waitPause(t *testing.T, pauses int) idleNow {
	t.Helper()
	start := time.Now()
	for {
		st := e.idleNow(t)
		if st.Idle.Paused && st.Idle.Pauses >= pauses {
			t.Logf("paused (pause %d) %.1f s after the wait began", pauses, time.Since(start).Seconds())
			return st
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("the VM did not pause within 2 min of idle %s: %+v", st.Idle.After, st)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// guestUptime is the guest's CLOCK_BOOTTIME: it stands still while the VM
// is paused (QEMU stops the guest's clocks with its vCPUs).
func (e *env) guestUptime(t *testing.T) float64 {
	t.Helper()
	out := e.run(time.Minute, e.vmdock, "ssh", "--", "cat", "/proc/uptime")
	f := strings.Fields(out)
	if len(f) == 0 {
		t.Fatalf("guest /proc/uptime: %q", out)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatalf("guest /proc/uptime %q: %v", out, err)
	}
	return up
}

// processCPU is a process's user+system CPU time in clock ticks (100/s).
func processCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("VM process: %v", err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	user, _ := strconv.ParseFloat(f[11], 64)
	sys, _ := strconv.ParseFloat(f[12], 64)
	return user + sys
}

// pauseHold is how long the first pause lasts: just past the keepalive
// window (a ping every KeepaliveInterval, its answer due within yamux's
// write timeout), so a keepalive left running through the pause would have
// ended the agent session by its end.
func pauseHold() time.Duration {
	window := agent.KeepaliveInterval + agent.YamuxConfig(slog.New(slog.DiscardHandler)).ConnectionWriteTimeout
	return window + 10*time.Second
}

// checkIdlePause: with idle set to 10s through the control
// API on a VM running no container, the VM pauses; a pause past the
// keepalive window (pauseHold) keeps the agent session (status counts the sessions), the guest's
// clocks stood still (the pause was real) and the first docker call wakes
// it; a connection to a forwarded port wakes it; a docker run issued
// during a pause runs; a sync flush during a pause wakes it and syncs.
// The wake latencies and the paused VM's CPU go to the log (the bench
// holds the targets); the checks fail only where a mechanism did nothing.
func checkIdlePause(t *testing.T, e *env, syncDir string) {
	// A forwarded port with no container behind it: the test image's
	// echo server, taken out of the image on the host and run by systemd
	// in the guest (which has no docker CLI; /run is noexec there).
	bin := filepath.Join(t.TempDir(), "echo-server")
	id := strings.TrimSpace(e.docker(time.Minute, "create", "vmdock-test:latest"))
	e.docker(time.Minute, "cp", id+":/echo-server", bin)
	e.docker(time.Minute, "rm", id)
	e.runWithStdin(t, bin, 2*time.Minute, e.vmdock, "ssh", "--", "sh", "-c",
		`cat > /usr/local/bin/e2e-echo-server && chmod 0755 /usr/local/bin/e2e-echo-server && `+
			`systemd-run --unit e2e-echo /usr/local/bin/e2e-echo-server -http 0.0.0.0:18123 -udp 127.0.0.1:18124 -tcp 127.0.0.1:18125`)
	waitForTestServer(t, 18123, time.Minute)
	// An idle keep-alive connection is an open forwarded connection: it
	// would hold the VM until Go's pool drops it (90 s).
	closeIdleHTTP()
	before := e.idleNow(t)
	out := e.run(time.Minute, e.vmdock, "set", "idle", "10s")
	t.Logf("set idle: %s", strings.TrimSpace(out))

	// 1: a pause past the keepalive window, woken by docker version.
	hold := pauseHold()
	upBefore, hostBefore := e.guestUptime(t), time.Now()
	st := e.waitPause(t, before.Idle.Pauses+1)
	cpu0, cpuAt := processCPU(t, st.Machine.PID), time.Now()
	time.Sleep(hold)
	cpuPct := (processCPU(t, st.Machine.PID) - cpu0) / time.Since(cpuAt).Seconds()
	if now := e.idleNow(t); !now.Idle.Paused {
		t.Fatalf("the VM woke during the %s pause with nothing using it: %+v", hold, now)
	}
	began := time.Now()
	e.docker(time.Minute, "version")
	wake := time.Since(began)
	after := e.idleNow(t)
	if after.Idle.Paused || after.Idle.Pauses != st.Idle.Pauses {
		t.Fatalf("after docker version: %+v", after)
	}
	if after.AgentSessions != before.AgentSessions {
		t.Errorf("the agent session did not survive the pause: %d sessions before, %d after", before.AgentSessions, after.AgentSessions)
	}
	upLag := time.Since(hostBefore).Seconds() - (e.guestUptime(t) - upBefore)
	t.Logf("%s pause: first docker version %.0f ms (host agent's wake %.0f ms), paused VM CPU %.2f%% of a core, guest clocks stood still %.0f s",
		hold, wake.Seconds()*1000, deref(after.Idle.LastWakeMs), cpuPct, upLag)
	// The guest's clocks stand still for nearly the whole hold; half of
	// it leaves room for the ssh calls around it.
	if upLag < hold.Seconds()/2 {
		t.Errorf("the guest's uptime lags the host by %.0f s over a %s pause: the VM was not paused", upLag, hold)
	}

	// 2: a connection to a forwarded port wakes it.
	e.waitPause(t, after.Idle.Pauses+1)
	began = time.Now()
	body, err := httpGet("http://127.0.0.1:18123/")
	t.Logf("forwarded port during a pause: answered in %.0f ms", time.Since(began).Seconds()*1000)
	if err != nil || body != "vmdock-test-ok\n" {
		t.Fatalf("forwarded port during a pause: %q, %v", body, err)
	}
	closeIdleHTTP()

	// 3: a docker run issued during a pause runs.
	st = e.waitPause(t, after.Idle.Pauses+2)
	if out := e.docker(2*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "echo", "ran-during-pause"); strings.TrimSpace(out) != "ran-during-pause" {
		t.Fatalf("docker run during a pause printed %q", out)
	}

	// 4: a sync flush during a pause wakes it; the halted sync mount runs
	// again and carries a host edit made during the pause.
	e.waitPause(t, st.Idle.Pauses+1)
	must(t, os.WriteFile(filepath.Join(syncDir, "during-pause.txt"), []byte("edited-while-paused\n"), 0o644))
	e.run(2*time.Minute, e.vmdock, "sync", "flush")
	if out := e.run(time.Minute, e.vmdock, "ssh", "--", "cat", filepath.Join(syncDir, "during-pause.txt")); strings.TrimSpace(out) != "edited-while-paused" {
		t.Errorf("host edit during a pause, after a sync flush: %q", out)
	}
	if end := e.idleNow(t); end.AgentSessions != before.AgentSessions {
		t.Errorf("agent sessions went from %d to %d over the pauses", before.AgentSessions, end.AgentSessions)
	}
	e.run(time.Minute, e.vmdock, "ssh", "--", "systemctl", "stop", "e2e-echo")
}

// runWithStdin runs a command of the test's environment with the file at
// stdinPath as its standard input.
func (e *env) runWithStdin(t *testing.T, stdinPath string, timeout time.Duration, name string, args ...string) {
	t.Helper()
	in, err := os.Open(stdinPath)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = e.environ()
	cmd.Dir = e.work
	cmd.Stdin = in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// closeIdleHTTP drops httpGet's pooled keep-alive connections.
func closeIdleHTTP() {
	if tr, ok := http.DefaultTransport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}
