//go:build e2e

package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/internal/procstat"
)

// Host ports of the network stack checks (TestE2E's range, ports_test.go).
const (
	downloadPort  = 18083 // the host loopback HTTP server of the 50 MB download
	leakProbePort = 18084 // the host listener a container must not reach
)

// checkNetStack runs the checks of the instance's network stack: that it
// is the one asked for, a DNS storm the host agent recovers from, a large
// download from the host's loopback, and that isolated lets nothing out
// but host access.
func checkNetStack(t *testing.T, e *env, wantStack string) {
	checkRunsOn(e, wantStack, "isolated")
	checkDNSStorm(t, e)
	checkHostDownload(t, e)
	checkIsolatedReachesOnlyHostAccess(t, e)
}

// checkRunsOn: status --json says the VM runs on wantStack in wantMode.
func checkRunsOn(e *env, wantStack, wantMode string) {
	e.timed("status --json names the network stack ("+wantStack+", "+wantMode+")", func(t *testing.T) {
		var st struct {
			HostAgent struct {
				Network struct{ Stack, Mode string } `json:"network"`
			} `json:"hostAgent"`
		}
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v", err)
		}
		if n := st.HostAgent.Network; n.Stack != wantStack || n.Mode != wantMode {
			t.Fatalf("hostAgent.network = %+v, want %s, %s", n, wantStack, wantMode)
		}
	})
}

// hostAgentLoad is the host agent's open descriptors and CPU time so far.
type hostAgentLoad struct {
	fds int
	cpu time.Duration
}

func readHostAgentLoad(t *testing.T, pid int) hostAgentLoad {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("host agent fds: %v", err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("host agent stat: %v", err)
	}
	cpu, err := procstat.CPUTime(string(stat))
	if err != nil {
		t.Fatal(err)
	}
	return hostAgentLoad{fds: len(ents), cpu: cpu}
}

// cpuRate is the host agent's CPU over a window, as a share of one core.
func cpuRate(t *testing.T, pid int, window time.Duration) (float64, hostAgentLoad) {
	t.Helper()
	a := readHostAgentLoad(t, pid)
	time.Sleep(window)
	b := readHostAgentLoad(t, pid)
	return float64(b.cpu-a.cpu) / float64(window), b
}

// checkDNSStorm: 500 lookups by 50 concurrent clients in one container,
// all answered; then the host agent's descriptors and CPU come back to
// their idle level within 10 s (a user-mode stack that keeps one host
// socket per UDP flow for long piled up thousands and spun on them).
func checkDNSStorm(t *testing.T, e *env) {
	e.timed("DNS storm: 500 lookups from 50 clients, then the host agent back to idle within 10 s", func(t *testing.T) {
		pid := readPID(t, filepath.Join(e.instDir(), "ha.pid"))
		idleRate, idle := cpuRate(t, pid, 2*time.Second)
		out := e.docker(5*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "sh", "-c",
			"seq 500 | xargs -P 50 -n 10 sh -c 'for i; do nslookup host.docker.internal >/dev/null 2>&1 && echo ok || echo fail; done' _ | grep -c ok")
		if got := strings.TrimSpace(out); got != "500" {
			t.Errorf("%s of 500 lookups answered", got)
		}
		after := readHostAgentLoad(t, pid)
		t.Logf("host agent before: %d fds, %.1f%% CPU idle; right after the storm: %d fds, %.2f s CPU used",
			idle.fds, idleRate*100, after.fds, (after.cpu - idle.cpu).Seconds())
		deadline := time.Now().Add(10 * time.Second)
		for {
			rate, now := cpuRate(t, pid, time.Second)
			if now.fds <= idle.fds+4 && rate <= idleRate+0.05 {
				t.Logf("back to idle after the storm: %d fds, %.1f%% CPU", now.fds, rate*100)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("10 s after the storm the host agent still has %d fds (idle %d) and %.1f%% CPU (idle %.1f%%)",
					now.fds, idle.fds, rate*100, idleRate*100)
			}
		}
	})
}

// checkHostDownload: a container downloads 50 MB from an HTTP server on
// the host's loopback through host access, checksum equal.
func checkHostDownload(t *testing.T, e *env) {
	e.timed("a container downloads 50 MB from the host's loopback via host.docker.internal, checksum equal", func(t *testing.T) {
		body := make([]byte, 50<<20)
		rand.Read(body)
		sum := sha256.Sum256(body)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(downloadPort)))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "big.bin", time.Time{}, bytes.NewReader(body))
		})}
		go srv.Serve(ln)
		defer srv.Close()
		start := time.Now()
		out := e.docker(10*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "sh", "-c",
			fmt.Sprintf("wget -qO- http://host.docker.internal:%d/big.bin | sha256sum", downloadPort))
		took := time.Since(start)
		if got, want := strings.Fields(out), hex.EncodeToString(sum[:]); len(got) == 0 || got[0] != want {
			t.Fatalf("sha256 in the container %q, want %s", out, want)
		}
		t.Logf("50 MiB in %.1f s (container start included): %.1f MiB/s", took.Seconds(), 50/took.Seconds())
	})
}

// checkIsolatedReachesOnlyHostAccess: with network mode isolated a
// container reaches the host's loopback through host access only: not
// through the gateway address (which the stack maps to the host's loopback
// when not isolated) nor through the host's own address on its network.
func checkIsolatedReachesOnlyHostAccess(t *testing.T, e *env) {
	e.timed("isolated: a container reaches the host only through host access; DNS refused", func(t *testing.T) {
		targets := []string{"10.0.2.2", "10.0.2.3"}
		lns := []net.Listener{listenOrFail(t, "127.0.0.1")}
		if ip := hostNetworkIP(); ip != "" {
			targets = append(targets, ip)
			lns = append(lns, listenOrFail(t, ip))
		}
		arrived := make(chan string, 16)
		for _, ln := range lns {
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					arrived <- c.RemoteAddr().String()
					c.Close()
				}
			}()
		}
		var script strings.Builder
		for _, target := range targets {
			fmt.Fprintf(&script, "if echo x | nc -w 5 %s %d; then echo LEAK %s; fi; ", target, leakProbePort, target)
		}
		fmt.Fprintf(&script, "echo x | nc -w 5 host.docker.internal %d && echo HOSTACCESS; ", leakProbePort)
		// Names leave no more than connections: the stack's DNS refuses at
		// once instead of asking the host's resolver.
		script.WriteString("nslookup example.com 10.0.2.3 2>&1 | grep -q REFUSED && echo DNSREFUSED")
		out := e.docker(3*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "sh", "-c", script.String())
		if strings.Contains(out, "LEAK") {
			t.Errorf("a container reached the host past host access: %q", out)
		}
		if !strings.Contains(out, "DNSREFUSED") {
			t.Errorf("the stack's DNS did not refuse a container's lookup: %q", out)
		}
		if !strings.Contains(out, "HOSTACCESS") {
			t.Errorf("host access itself did not connect (the check would prove nothing): %q", out)
		}
		if n := len(arrived); n != 1 {
			t.Errorf("%d connections arrived on the host listeners, want 1 (host access's); tried %v", n, targets)
		}
	})
}

func listenOrFail(t *testing.T, ip string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(leakProbePort)))
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// hostNetworkIP is an IPv4 address of this machine on a network, not its
// loopback, or "" when it has none.
func hostNetworkIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
