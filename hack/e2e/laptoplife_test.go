//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What a laptop does to its VM's network: it loses it, gets it back,
// moves to another network with another resolver, and sleeps. These
// checks run in a lane in its own network (ownnetwork_test.go).

// freezeEchoPort is the published TCP echo a connection stays open on
// through the freeze (TestE2EResume's range, ports_test.go).
const freezeEchoPort = 18130

// healLimit is how soon after the network comes back requests must work.
const healLimit = 10 * time.Second

// checkNetworkLoss: a container loops requests by name to the outside;
// the lane's address and routes go away for 30 s and come back, then it
// moves to the other subnet, whose resolver answers the names with its
// own address. Requests work again within healLimit of each, the published
// port answers on both loopbacks throughout, and the host agent's
// descriptors come back to their level.
func checkNetworkLoss(t *testing.T, e *env, n *ownNetwork) {
	e.timed("network lost 30 s, back, then moved to another subnet and resolver: requests by name work within 10 s, ports answer throughout", func(t *testing.T) {
		// The name is looked up by nslookup each round: the test image's
		// static busybox wget resolves nothing without glibc's NSS modules
		// (and its -T crashes it, so timeout bounds it).
		loop := fmt.Sprintf(`while true; do ip=$(nslookup %s 2>/dev/null | sed -n 's/^Address:[[:space:]]*\([0-9.]*\)$/\1/p' | tail -n 1); `+
			`if [ -n "$ip" ] && timeout 3 /bin/busybox wget -q -O - "http://$ip:%d/" 2>/dev/null | grep -q %s; then echo OK; else echo FAIL; fi; sleep 0.5; done`,
			corpName, corpWebPort, corpWebBody)
		e.docker(2*time.Minute, "run", "-d", "--name", "netloop", "vmdock-test:latest", "/bin/busybox", "sh", "-c", loop)
		defer e.try(time.Minute, "docker", "--context", "vmdock", "rm", "-f", "netloop")
		pid := hostAgentStatus(t, e).PID
		start := time.Now()
		e.waitLoop(t, "OK", start, time.Minute)
		fdsBefore := readHostAgentLoad(t, pid).fds

		n.leave(t, hostIP)
		lost := time.Now()
		e.waitLoop(t, "FAIL", lost, 30*time.Second) // the loss is real
		for time.Since(lost) < 30*time.Second {
			checkPortAnswersOnBothLoopbacks(t, resumeWebPort)
			time.Sleep(3 * time.Second)
		}
		n.join(t, hostIP, corpIP)
		took := e.waitLoop(t, "OK", time.Now(), healLimit)
		t.Logf("network back: the first request by name worked %.1f s later", took.Seconds())

		n.leave(t, hostIP)
		left := time.Now()
		e.waitLoop(t, "FAIL", left, 30*time.Second)
		n.useResolver(t, corpIP2)
		n.join(t, hostIP2, corpIP2)
		took = e.waitLoop(t, "OK", time.Now(), healLimit)
		t.Logf("moved to %s with resolver %s: the first request by name worked %.1f s later", hostIP2, corpIP2, took.Seconds())
		checkPortAnswersOnBothLoopbacks(t, resumeWebPort)

		deadline := time.Now().Add(30 * time.Second)
		for fds := readHostAgentLoad(t, pid).fds; fds > fdsBefore+10; fds = readHostAgentLoad(t, pid).fds {
			if time.Now().After(deadline) {
				t.Errorf("the host agent holds %d descriptors 30 s after the move, %d before the loss", fds, fdsBefore)
				break
			}
			time.Sleep(time.Second)
		}
	})
}

// waitLoop waits for the netloop container's first line saying want
// logged at or after since (by the guest's clock, which the host agent
// keeps on the host's), and returns how long after since it came. It
// fails when none came within limit.
func (e *env) waitLoop(t *testing.T, want string, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	// Polling adds its own delay; the log's time is what is judged.
	giveUp := since.Add(limit + 10*time.Second)
	for {
		out, _, _ := e.try(time.Minute, "docker", "--context", "vmdock", "logs", "-t", "--since",
			strconv.FormatFloat(float64(since.UnixNano())/1e9, 'f', 3, 64), "netloop")
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			stamp, line, ok := strings.Cut(sc.Text(), " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if !ok || err != nil || strings.TrimSpace(line) != want {
				continue
			}
			took := max(at.Sub(since), 0)
			if took > limit {
				t.Fatalf("the first %s came %.1f s after %s, want within %s", want, took.Seconds(), since.Format(time.TimeOnly), limit)
			}
			return took
		}
		if time.Now().After(giveUp) {
			t.Fatalf("no %s from the request loop within %s of %s:\n%s", want, limit, since.Format(time.TimeOnly), out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func checkPortAnswersOnBothLoopbacks(t *testing.T, port int) {
	t.Helper()
	for _, host := range []string{"127.0.0.1", "[::1]"} {
		body, err := httpGet(fmt.Sprintf("http://%s:%d/", host, port))
		if err != nil || body != "vmdock-test-ok\n" {
			t.Errorf("published port %d on %s: %q, %v", port, host, body, err)
		}
	}
}

// hostAgentPIDs is what status says of the host agent and its VM.
type hostAgentPIDs struct {
	PID     int `json:"pid"`
	Machine struct {
		PID int `json:"pid"`
	} `json:"machine"`
}

func hostAgentStatus(t *testing.T, e *env) hostAgentPIDs {
	t.Helper()
	var st struct {
		HostAgent hostAgentPIDs `json:"hostAgent"`
	}
	out := e.run(time.Minute, e.vmdock, "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.HostAgent.PID == 0 || st.HostAgent.Machine.PID == 0 {
		t.Fatalf("status --json: %v, host agent %+v", err, st.HostAgent)
	}
	return st.HostAgent
}

// checkHostFreeze: the VM and its host agent frozen together for 90 s, as
// a laptop's sleep stops both, then thawed: the guest's clock is within
// 2 s of the host's within 5 s, docker answers, a TCP connection open
// through a published port echoes on, and the host agent's log shows it
// noticed.
func checkHostFreeze(t *testing.T, e *env) {
	e.timed("VM and host agent frozen 90 s: the clock follows within 5 s, docker answers, an open connection echoes, the wake logged", func(t *testing.T) {
		e.docker(2*time.Minute, "run", "-d", "--name", "freezeecho", "-p", fmt.Sprintf("%d:82", freezeEchoPort), "vmdock-test:latest")
		defer e.try(time.Minute, "docker", "--context", "vmdock", "rm", "-f", "freezeecho")
		c := dialEcho(t, freezeEchoPort)
		defer c.Close()
		pids := hostAgentStatus(t, e)
		for _, pid := range []int{pids.PID, pids.Machine.PID} {
			must(t, syscall.Kill(pid, syscall.SIGSTOP))
		}
		thaw := func() {
			for _, pid := range []int{pids.Machine.PID, pids.PID} {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}
		defer thaw()
		time.Sleep(90 * time.Second)
		thaw()
		thawed := time.Now()
		var skew float64
		for {
			sent := time.Now()
			out := e.run(time.Minute, e.vmdock, "ssh", "--", "date", "+%s.%N")
			guest, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
			if err != nil {
				t.Fatalf("guest date %q: %v", out, err)
			}
			skew = guest - float64(sent.Add(time.Since(sent)/2).UnixNano())/1e9
			if skew < 2 && skew > -2 {
				t.Logf("guest clock %.2f s off the host's %.1f s after the thaw", skew, sent.Sub(thawed).Seconds())
				if sent.Sub(thawed) > 5*time.Second {
					t.Errorf("the guest clock came within 2 s only %.1f s after the thaw", sent.Sub(thawed).Seconds())
				}
				break
			}
			if time.Since(thawed) > time.Minute {
				t.Fatalf("the guest clock is still %.1f s off a minute after the thaw", skew)
			}
			time.Sleep(500 * time.Millisecond)
		}
		e.docker(time.Minute, "ps", "-q")
		echo(t, c, "after the freeze")
		logf := filepath.Join(e.home, "default", "hostagent.log")
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(logf)
			if strings.Contains(string(b), "the host agent was frozen") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the host agent's log does not show the wake")
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}

// dialEcho returns a connection through the published port that has
// echoed once: the host side listens before the container's server does.
func dialEcho(t *testing.T, port int) net.Conn {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
		if err == nil {
			if err = echoOnce(c, "before the freeze"); err == nil {
				return c
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo port %d: %v", port, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// echo sends line on c and wants it back within 20 s.
func echo(t *testing.T, c net.Conn, line string) {
	t.Helper()
	if err := echoOnce(c, line); err != nil {
		t.Fatal(err)
	}
}

func echoOnce(c net.Conn, line string) error {
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return fmt.Errorf("write %q: %w", line, err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || strings.TrimSpace(got) != line {
		return fmt.Errorf("echo of %q: %q, %v", line, got, err)
	}
	return nil
}
