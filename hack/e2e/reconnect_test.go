//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkAgentReconnect kills the guest agent (kill -9, then a `systemctl
// restart` of its unit) under a running instance while a `docker ps` loop
// runs: systemd brings the agent back, and the host agent must redial by
// itself, so that docker and a published port answer within 5 s of the
// new agent's start, and host access works again. Needs a Running
// instance with the test image loaded; leaves it Running.
func checkAgentReconnect(t *testing.T, e *env) {
	e.docker(3*time.Minute, "run", "-d", "--name", "reconnect-web", "-p", fmt.Sprintf("%d:80", reconnectPort), "vmdock-test:latest")
	defer e.try(time.Minute, "docker", "--context", "vmdock", "rm", "-f", "reconnect-web")
	e.timed("published port answers before the agent is killed", func(t *testing.T) {
		waitForTestServer(t, reconnectPort, 30*time.Second)
	})
	for _, fault := range []struct{ name, cmd string }{
		{"kill -9", "kill -9 %d"},
		{"systemctl restart", "systemctl restart vmdock-agent"},
	} {
		e.timed("guest agent "+fault.name+": docker and ports back within 5 s", func(t *testing.T) {
			agentFault(t, e, fault.name, fault.cmd)
		})
	}
}

// agentFault runs one fault (cmd gets the agent's pid for %d) and checks
// the recovery.
func agentFault(t *testing.T, e *env, name, cmd string) {
	oldPID := guestAgentPID(t, e)
	if strings.Contains(cmd, "%d") {
		cmd = fmt.Sprintf(cmd, oldPID)
	}
	docker := startProbeLoop(func() error {
		_, _, err := e.try(30*time.Second, "docker", "--context", "vmdock", "ps", "-q")
		return err
	})
	defer docker.stop()
	port := startProbeLoop(func() error {
		body, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/", reconnectPort))
		if err == nil && body != "vmdock-test-ok\n" {
			err = fmt.Errorf("body %q", body)
		}
		return err
	})
	defer port.stop()
	statusSeen := watchStatusFor(e, "reconnecting")
	// In a unit of its own: the fault takes the agent's cgroup, this ssh
	// session's commands included, down with it.
	runT(t, e, time.Minute, e.vmdock, "ssh", "--", "systemd-run", "--no-block", "--collect", "sh", "-c", "sleep 1; "+cmd)
	faultAt := time.Now().Add(time.Second)

	var newPID int
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if pid, err := tryGuestAgentPID(e); err == nil && pid != oldPID && pid > 0 {
			newPID = pid
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest agent (pid %d) was not replaced within 2 minutes of %s", oldPID, name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	agentBack := guestAgentStart(t, e)
	t.Logf("%s: agent pid %d -> %d, new agent started %.1f s after the fault", name, oldPID, newPID, agentBack.Sub(faultAt).Seconds())

	dockerBack, err := docker.firstSuccessAfter(agentBack, time.Minute)
	if err != nil {
		t.Fatalf("docker ps after %s: %v", name, err)
	}
	portBack, err := port.firstSuccessAfter(agentBack, time.Minute)
	if err != nil {
		t.Fatalf("published port after %s: %v", name, err)
	}
	dockerAfter, portAfter := dockerBack.Sub(agentBack), portBack.Sub(agentBack)
	t.Logf("%s: docker answered %.1f s, the published port %.1f s after the new agent started; failed meanwhile: %d docker ps, %d GETs; status said reconnecting: %v",
		name, dockerAfter.Seconds(), portAfter.Seconds(), docker.failures(), port.failures(), statusSeen())
	if dockerAfter > 5*time.Second {
		t.Errorf("docker answered only %s after the guest agent was back; want within 5 s", dockerAfter)
	}
	if portAfter > 5*time.Second {
		t.Errorf("the published port answered only %s after the guest agent was back; want within 5 s", portAfter)
	}
	checkHostAccessAfterReconnect(t, e)
	e.reliable("guest agent "+name, dockerAfter, fmt.Sprintf("host agent redials; docker back %.1f s, published port %.1f s after systemd restarts the agent", dockerAfter.Seconds(), portAfter.Seconds()), "none")
}

func guestAgentPID(t *testing.T, e *env) int {
	t.Helper()
	pid, err := tryGuestAgentPID(e)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func tryGuestAgentPID(e *env) (int, error) {
	out, errOut, err := e.try(20*time.Second, e.vmdock, "ssh", "--", "systemctl", "show", "-p", "MainPID", "--value", "vmdock-agent")
	if err != nil {
		return 0, fmt.Errorf("guest agent pid: %v: %s", err, errOut)
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// guestAgentStart is when, on the host's clock, the running guest agent
// started: the guest says how long ago (its uptime minus the unit's start
// on the same monotonic clock), which needs no synced clocks.
func guestAgentStart(t *testing.T, e *env) time.Time {
	t.Helper()
	before := time.Now()
	out := runT(t, e, 20*time.Second, e.vmdock, "ssh", "--", "sh", "-c",
		"echo $(cut -d' ' -f1 /proc/uptime) $(systemctl show -p ExecMainStartTimestampMonotonic --value vmdock-agent)")
	asked := before.Add(time.Since(before) / 2)
	f := strings.Fields(out)
	if len(f) != 2 {
		t.Fatalf("agent start: %q", out)
	}
	uptime, err1 := strconv.ParseFloat(f[0], 64)
	startUS, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("agent start: %q", out)
	}
	ago := time.Duration(uptime*float64(time.Second)) - time.Duration(startUS)*time.Microsecond
	return asked.Add(-ago)
}

// probeLoop runs a probe back to back and records when each success ended.
type probeLoop struct {
	mu    sync.Mutex
	ok    []time.Time
	fails int
	quit  chan struct{}
	done  chan struct{}
}

func startProbeLoop(probe func() error) *probeLoop {
	l := &probeLoop{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.quit:
				return
			default:
			}
			err := probe()
			l.mu.Lock()
			if err == nil {
				l.ok = append(l.ok, time.Now())
			} else {
				l.fails++
			}
			l.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return l
}

func (l *probeLoop) stop() {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	<-l.done
}

func (l *probeLoop) failures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fails
}

// firstSuccessAfter waits for a probe that succeeded after t0.
func (l *probeLoop) firstSuccessAfter(t0 time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, ok := range l.ok {
			if ok.After(t0) {
				l.mu.Unlock()
				return ok, nil
			}
		}
		l.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("no success within %s of the guest agent's return (%d failed)", timeout, l.failures())
}

// watchStatusFor polls `vmdock status` in the background for a while and
// reports whether its output ever contained want. The reconnect may be
// over before a poll sees it, so this is reported, not required.
func watchStatusFor(e *env, want string) func() bool {
	var mu sync.Mutex
	seen := false
	go func() {
		end := time.Now().Add(30 * time.Second)
		for time.Now().Before(end) {
			out, _, _ := e.try(5*time.Second, e.vmdock, "status")
			if strings.Contains(out, want) {
				mu.Lock()
				seen = true
				mu.Unlock()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// checkHostAccessAfterReconnect proves the new guest agent serves host
// access (and the name host.docker.internal) again: its listener and DNS
// server lived in the old agent process.
func checkHostAccessAfterReconnect(t *testing.T, e *env) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "host-after-reconnect\n")
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	out := runT(t, e, 3*time.Minute, "docker", "--context", "vmdock", "run", "--rm", "vmdock-test:latest",
		"/bin/busybox", "sh", "-c", fmt.Sprintf("nc -w 30 host.docker.internal %d </dev/null", port))
	if strings.TrimSpace(out) != "host-after-reconnect" {
		t.Fatalf("host access after the reconnect: %q", out)
	}
}

// runT is e.run failing t, for use inside subtests.
func runT(t *testing.T, e *env, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	out, errOut, err := e.try(timeout, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out, errOut)
	}
	return out
}
