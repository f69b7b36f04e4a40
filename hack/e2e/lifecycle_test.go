//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// previousContext is the docker context start replaced, as the instance
// remembers it ("" when none).
func (e *env) previousContext(t *testing.T) string {
	t.Helper()
	var s struct {
		PreviousContext string `json:"previousContext"`
	}
	if b, err := os.ReadFile(filepath.Join(e.instDir(), "state.json")); err == nil {
		json.Unmarshal(b, &s)
	}
	return s.PreviousContext
}

// checkContextRestored fails unless the docker context is prev again.
func (e *env) checkContextRestored(t *testing.T, prev string) {
	t.Helper()
	if prev == "" {
		return
	}
	if cur := strings.TrimSpace(e.run(time.Minute, "docker", "context", "show")); cur != prev {
		t.Fatalf("current docker context = %q, want the previous %q back", cur, prev)
	}
}

// checkGuestPowerOff powers the guest off from inside: the instance must
// read Stopped (never Broken) within seconds, the previous docker context
// must come back without any `vmdock stop`, and a plain `vmdock start`
// (saved config) must boot it again. Needs a Running instance whose start
// switched the context.
func checkGuestPowerOff(t *testing.T, e *env) {
	e.timed("guest powers itself off: Stopped, context restored", func(t *testing.T) {
		prev := e.previousContext(t)
		// The agent runs commands as root (the image has no sudo). The ssh
		// session may die with the guest; its exit status means nothing.
		out, errOut, err := e.try(time.Minute, e.vmdock, "ssh", "--", "poweroff")
		t.Logf("ssh -- poweroff: %v %s %s", err, out, errOut)
		began := time.Now()
		for {
			out, _, _ = e.try(10*time.Second, e.vmdock, "status")
			if strings.Contains(out, "Broken") {
				t.Fatalf("status after the guest's own power-off:\n%s\nwant Stopped, not Broken", out)
			}
			if strings.Contains(out, "Stopped") {
				break
			}
			if time.Since(began) > 2*time.Minute {
				t.Fatalf("status never said Stopped after the guest's power-off; last:\n%s", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		detect := time.Since(began)
		t.Logf("Stopped %.1f s after `ssh -- poweroff` returned", detect.Seconds())
		if detect > 30*time.Second {
			t.Errorf("Stopped only after %s", detect)
		}
		checkNothingLeft(t, e)
		e.checkContextRestored(t, prev)
		e.reliable("guest powers itself off (`poweroff`)", detect, "status Stopped, docker context restored; `start` boots again", "none")
	})
	e.timed("start after the guest's own power-off", func(t *testing.T) {
		e.run(15*time.Minute, e.vmdock, "start")
		e.docker(2*time.Minute, "version")
	})
}

// checkStopWithoutAgent kills the guest agent for good (its unit masked,
// so systemd does not bring it back) and checks that `vmdock stop` falls
// back to ACPI and then a forced stop in under 15 s, says which path it
// took, and leaves nothing running. The instance is Stopped afterwards.
func checkStopWithoutAgent(t *testing.T, e *env) {
	e.timed("guest agent gone: vmdock stop within 15 s", func(t *testing.T) {
		prev := e.previousContext(t)
		// A runtime drop-in turns the unit's restart off, then the agent
		// is killed. It runs in a unit of its own, so the kill does not take
		// this ssh session (a child of the agent) down before it returns;
		// its output goes to the serial console for the post-mortem.
		kill := `exec >/dev/console 2>&1; set -x; sleep 1
d=/run/systemd/system/vmdock-agent.service.d
mkdir -p $d && printf '[Service]\nRestart=no\n' > $d/zz-e2e-no-restart.conf
systemctl daemon-reload
systemctl kill -s KILL vmdock-agent`
		e.run(time.Minute, e.vmdock, "ssh", "--", "systemd-run", "--no-block", "--collect", "sh", "-c", kill)
		// daemon-reload alone takes seconds on a TCG guest.
		for began := time.Now(); ; time.Sleep(time.Second) {
			if _, _, err := e.try(10*time.Second, e.vmdock, "ssh", "--", "true"); err != nil {
				break
			}
			if time.Since(began) > time.Minute {
				out, _ := os.ReadFile(filepath.Join(e.instDir(), "serial.log"))
				t.Fatalf("the guest agent still answers a minute after the kill; serial console:\n%s", tailLines(string(out), 30))
			}
		}
		time.Sleep(3 * time.Second) // past the unit's RestartSec: it must stay down
		began := time.Now()
		out := e.run(time.Minute, e.vmdock, "stop")
		took := time.Since(began)
		t.Logf("vmdock stop took %.1f s:\n%s", took.Seconds(), out)
		if took > 15*time.Second {
			t.Errorf("vmdock stop with the guest agent gone took %s; want under 15 s", took)
		}
		if !strings.Contains(out, "ACPI") && !strings.Contains(out, "forced") {
			t.Errorf("stop did not say which path it took:\n%s", out)
		}
		checkNothingLeft(t, e)
		e.checkContextRestored(t, prev)
		path := "ACPI power button"
		if strings.Contains(out, "forced") {
			path = "ACPI, then forced"
		}
		e.reliable("guest agent killed and kept down, then `vmdock stop`", 0, "stop falls back to the "+path+" in "+took.Round(100*time.Millisecond).String(), "none")
	})
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkRestart runs `vmdock restart` on a Running instance: its stop ends
// the host agent and the VM (none of their processes is left), its start
// boots a new pair with the saved config, runtime included. What a plain
// stop leaves (nothing) is checked by the test's last stop.
func checkRestart(t *testing.T, e *env) {
	e.timed("vmdock restart: the old host agent and VM gone, new ones Running with the saved config", func(t *testing.T) {
		var before struct {
			HostAgent struct {
				Runtime string `json:"runtime"`
			} `json:"hostAgent"`
		}
		if err := json.Unmarshal([]byte(e.run(time.Minute, e.vmdock, "status", "--json")), &before); err != nil || before.HostAgent.Runtime == "" {
			t.Fatalf("status --json before the restart: %v, runtime %q", err, before.HostAgent.Runtime)
		}
		oldPIDs := []int{readPID(t, filepath.Join(e.instDir(), "ha.pid")), readPID(t, filepath.Join(e.instDir(), "qemu.pid"))}
		e.run(15*time.Minute, e.vmdock, "restart")
		// ps, not kill(pid, 0): an exited host agent may stay a zombie
		// where nothing reaps orphans, but its command line is gone.
		for _, line := range processesMatching(e.home) {
			for _, pid := range oldPIDs {
				if f := strings.Fields(line); len(f) > 0 && f[0] == strconv.Itoa(pid) {
					t.Errorf("process %d of the instance before the restart still runs: %s", pid, line)
				}
			}
		}
		var after struct {
			Status    string `json:"status"`
			HostAgent struct {
				Runtime string `json:"runtime"`
			} `json:"hostAgent"`
		}
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if err := json.Unmarshal([]byte(out), &after); err != nil || after.Status != "Running" || after.HostAgent.Runtime != before.HostAgent.Runtime {
			t.Fatalf("status --json after the restart (runtime before %q): %v\n%s", before.HostAgent.Runtime, err, out)
		}
	})
}
