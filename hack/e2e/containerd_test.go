//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/bench/probe"
)

// TestE2EContainerd boots one containerd instance (`make e2e-containerd`)
// and runs nerdctl through vmdock: load, run, bind mounts, published ports,
// host access, the installed script, build, and images across a `vmdock
// restart` (the one restart of the e2e tests: its stop and its start).
func TestE2EContainerd(t *testing.T) {
	if os.Getenv("VMDOCK_E2E_CONTAINERD") != "1" {
		t.Skip("set VMDOCK_E2E_CONTAINERD=1 to boot a containerd instance")
	}
	e, base := newEnv(t, "amd64")
	defer e.printTimings()
	// The image goes into the working folder, which the guest shares at
	// the same path: `nerdctl load -i` runs there and reads it by name.
	tarName := "vmdock-test.tar"
	if b, err := os.ReadFile(e.testTar); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(e.work, tarName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// container domains on free ports (80/443 may be taken or refused)
	domainPorts := pickDomainPorts(t)
	e.configure(fmt.Sprintf("runtime: containerd\nmountType: 9p\nmounts:\n  - location: %q\n    writable: true\n", e.work) + domainPorts.configYAML())
	// A Mac user's other way to an image: import one built on Linux, then
	// a plain start (no --image, no checkout) boots it.
	e.outsideCheckout(t, base)
	built := filepath.Join(e.repo, "hack", "image", "out", "vmdock-amd64.tar.zst")
	e.timed("image import of the built image makes it the default", func(t *testing.T) {
		out := e.run(10*time.Minute, e.vmdock, "image", "import", built)
		if !strings.Contains(out, "(vmdock, amd64)") {
			t.Fatalf("image import: %q", out)
		}
	})
	startArgs := []string{"start", "--runtime", "containerd", "--cpus", "2", "--memory", "2", "--network-mode", "isolated"}
	nerdctl := func(timeout time.Duration, args ...string) string {
		t.Helper()
		return e.run(timeout, e.vmdock, append([]string{"nerdctl", "--"}, args...)...)
	}

	e.timed("vmdock start --runtime containerd (cold boot)", func(t *testing.T) {
		e.run(15*time.Minute, e.vmdock, startArgs...)
	})
	e.timed("the start booted the imported image", func(t *testing.T) {
		checkDefaultImageFrom(t, e, "amd64", built)
	})
	checkRunsOn(e, "gvisor", "isolated")
	e.timed("status shows the runtime and its socket; no docker context", func(t *testing.T) {
		var st struct {
			Status           string `json:"status"`
			DockerSocket     string `json:"dockerSocket"`
			ContainerdSocket string `json:"containerdSocket"`
			HostAgent        struct {
				Runtime string `json:"runtime"`
			} `json:"hostAgent"`
		}
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		sock := filepath.Join(e.home, "default", "containerd.sock")
		if st.Status != "Running" || st.ContainerdSocket != sock || st.DockerSocket != "" || st.HostAgent.Runtime != "containerd" {
			t.Errorf("status: %+v", st)
		}
		fi, err := os.Stat(sock)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("containerd socket: %v %v, want mode 0600", fi, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := probe.GRPCLatency(ctx, sock, probe.ContainerdVersionURL, 1); err != nil {
			t.Errorf("containerd's Version call through %s: %v", sock, err)
		}
		if out := e.run(time.Minute, "docker", "context", "ls", "--format", "{{.Name}}"); strings.Contains(out, "vmdock") {
			t.Errorf("a containerd instance made a docker context: %q", out)
		}
		if out := e.run(time.Minute, e.vmdock, "status"); !strings.Contains(out, "containerd socket:") {
			t.Errorf("status lacks the containerd socket:\n%s", out)
		}
	})
	e.timed("vmdock nerdctl load -i (in the shared working folder)", func(t *testing.T) {
		nerdctl(5*time.Minute, "load", "-i", tarName)
	})
	e.timed("nerdctl run --rm prints", func(t *testing.T) {
		if out := nerdctl(5*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "echo", "hello-from-nerdctl"); strings.TrimSpace(out) != "hello-from-nerdctl" {
			t.Fatalf("output %q", out)
		}
	})
	e.timed("exit status passes through", func(t *testing.T) {
		_, _, err := e.try(2*time.Minute, e.vmdock, "nerdctl", "--", "run", "--rm", "vmdock-test:latest", "/bin/busybox", "sh", "-c", "exit 7")
		if code := exitCode(err); code != 7 {
			t.Fatalf("exit status %d (%v), want 7", code, err)
		}
	})
	e.timed("bind mount of a folder with a space, both ways", func(t *testing.T) {
		sub := filepath.Join(e.work, "sub dir")
		must(t, os.MkdirAll(sub, 0o755))
		must(t, os.WriteFile(filepath.Join(sub, "from-host.txt"), []byte("host-data\n"), 0o644))
		out := nerdctl(3*time.Minute, "run", "--rm", "-v", sub+":/w", "vmdock-test:latest",
			"/bin/busybox", "sh", "-c", "cat /w/from-host.txt && echo container-data > /w/from-container.txt")
		if strings.TrimSpace(out) != "host-data" {
			t.Fatalf("container read %q", out)
		}
		if b, err := os.ReadFile(filepath.Join(sub, "from-container.txt")); err != nil || string(b) != "container-data\n" {
			t.Fatalf("host reads %q, %v", b, err)
		}
	})
	checkNerdctlPorts(t, e, nerdctl)
	checkNerdctlDomains(t, e, nerdctl, domainPorts)
	checkNerdctlHostAccess(t, e, nerdctl)
	e.timed("vmdock nerdctl install, then the script runs nerdctl ps", func(t *testing.T) {
		dir := filepath.Join(base, "bin dir")
		must(t, os.MkdirAll(dir, 0o755))
		e.run(time.Minute, e.vmdock, "nerdctl", "install", "--path", dir)
		out := e.run(2*time.Minute, filepath.Join(dir, "nerdctl"), "ps", "-a")
		if !strings.Contains(out, "CONTAINER ID") {
			t.Fatalf("installed nerdctl ps: %q", out)
		}
	})
	e.timed("nerdctl build FROM the loaded image", func(t *testing.T) {
		ctx := filepath.Join(e.work, "build ctx")
		must(t, os.MkdirAll(ctx, 0o755))
		must(t, os.WriteFile(filepath.Join(ctx, "hello.txt"), []byte("built-by-buildkit\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM vmdock-test:latest\nCOPY hello.txt /hello.txt\n"), 0o644))
		nerdctl(10*time.Minute, "build", "-t", "vmdock-built:latest", ctx)
		if out := nerdctl(3*time.Minute, "run", "--rm", "vmdock-built:latest", "/bin/busybox", "cat", "/hello.txt"); strings.TrimSpace(out) != "built-by-buildkit" {
			t.Fatalf("built image: %q", out)
		}
	})
	checkRestart(t, e)
	e.timed("images survive the restart", func(t *testing.T) {
		out := nerdctl(2*time.Minute, "images", "--format", "{{.Repository}}:{{.Tag}}")
		if !strings.Contains(out, "vmdock-test:latest") {
			t.Fatalf("images after restart: %q", out)
		}
	})
	e.timed("vmdock stop", func(t *testing.T) {
		e.run(5*time.Minute, e.vmdock, "stop")
		checkNothingLeft(t, e)
	})
}

// checkNerdctlPorts: nerdctl publishes through CNI portmap (DNAT, no
// listening socket); the guest agent finds the rule and the host forwards
// the port like docker's.
func checkNerdctlPorts(t *testing.T, e *env, nerdctl func(time.Duration, ...string) string) {
	nerdctl(3*time.Minute, "run", "-d", "--name", "web", "-p", fmt.Sprintf("%d:80", nerdctlWebPort), "vmdock-test:latest")
	runReturned := time.Now()
	var visible time.Duration
	e.timed("port visible on host after nerdctl run -p", func(t *testing.T) {
		waitForTestServer(t, nerdctlWebPort, 30*time.Second)
		visible = time.Since(runReturned)
		t.Logf("GET 127.0.0.1:%d answered %.2fs after nerdctl run returned", nerdctlWebPort, visible.Seconds())
	})
	e.timings[len(e.timings)-1].d = visible
	if out, _, err := e.try(time.Minute, e.vmdock, "ssh", "--", "iptables-save", "-t", "nat"); err == nil {
		t.Logf("guest nat table with a published port:\n%s", out)
	}
	nerdctl(3*time.Minute, "rm", "-f", "web")
	e.checkPortClosed(fmt.Sprintf("127.0.0.1:%d", nerdctlWebPort), "nerdctl rm -f")
}

// checkNerdctlDomains: container domains under the containerd runtime.
// The host agent reads the names through nerdctl in the guest (container
// inspect for the list and each container's address in its network
// namespace, nerdctl events for when to read again): a container with no
// -p answers by name, a compose service by <service>.<project>, and a
// removed container's name goes within 2 s.
func checkNerdctlDomains(t *testing.T, e *env, nerdctl func(time.Duration, ...string) string, ports domainPorts) {
	url := func(name string) string { return fmt.Sprintf("http://%s.vmdock.localhost:%d/", name, ports.http) }
	plain := domainClient(nil)
	e.timed("nerdctl domains: a container with no -p answers by name", func(t *testing.T) {
		// the test image exposes 80 and 82: the label picks the port
		nerdctl(3*time.Minute, "run", "-d", "--name", "ctrd-web", "--label", "dev.vmdock.http-port=80", "vmdock-test:latest")
		// and one with both ports and no label, for the listing below
		nerdctl(3*time.Minute, "run", "-d", "--name", "ctrd-multi", "vmdock-test:latest")
		t.Logf("http://ctrd-web.vmdock.localhost answered %v after nerdctl run returned", waitBody(t, plain, url("ctrd-web"), okBody, time.Minute))
	})
	e.timed("nerdctl domains: domains --json lists the name; two exposed ports and no label is a problem", func(t *testing.T) {
		type listing struct {
			Routes []struct {
				Name, Container, Addr, Problem string
				Port                           int
			}
			Listening []string
		}
		var l listing
		var routes map[string]string
		deadline := time.Now().Add(time.Minute)
		for {
			l = listing{} // a route's omitted port and address must not come from the last read
			out := e.run(time.Minute, e.vmdock, "domains", "--json")
			if err := json.Unmarshal([]byte(out), &l); err != nil {
				t.Fatalf("domains --json: %v\n%s", err, out)
			}
			routes = map[string]string{}
			for _, r := range l.Routes {
				routes[r.Name] = fmt.Sprintf("%s port=%d addr=%s problem=%s", r.Container, r.Port, r.Addr, r.Problem)
			}
			if _, ok := routes["ctrd-multi.vmdock.localhost"]; ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("domains --json routes: %v, listening %v", routes, l.Listening)
		if w := routes["ctrd-web.vmdock.localhost"]; !strings.HasPrefix(w, "ctrd-web port=80 addr=") || strings.Contains(w, "addr= ") {
			t.Errorf("ctrd-web's route: %q, want port 80 to its address in the guest", w)
		}
		if m := routes["ctrd-multi.vmdock.localhost"]; !strings.Contains(m, "(80, 82)") {
			t.Errorf("ctrd-multi's route: %q, want a problem naming the image's ports 80 and 82", m)
		}
		if len(l.Listening) == 0 {
			t.Errorf("domains --json names no listening address")
		}
	})
	// A compose service's <service>.<project> name is checked in the main
	// boot (docker-compose); `nerdctl compose` sets the same labels, which
	// a run here proved once (87 s under TCG, too dear for every CI run).
	var gone time.Duration
	e.timed("nerdctl domains: a removed container's name goes within 2 s", func(t *testing.T) {
		nerdctl(3*time.Minute, "rm", "-f", "ctrd-web", "ctrd-multi")
		removed := time.Now()
		var last string
		for {
			code, body, err := getBody(plain, url("ctrd-web"))
			if err == nil && code == http.StatusNotFound && strings.Contains(body, "No such container name") && !strings.Contains(body, okBody) {
				gone = time.Since(removed)
				break
			}
			last = fmt.Sprintf("%d %q %v", code, trimTo(body, 200), err)
			if time.Since(removed) > 2*time.Second {
				t.Fatalf("2 s after nerdctl rm -f returned the name still gives %s, want the unknown-name page", last)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("the name gave the unknown-name page %v after nerdctl rm -f returned", gone)
	})
	e.timings[len(e.timings)-1].d = gone
}

// checkNerdctlHostAccess: an "IDE" on the host's loopback, reached from a
// nerdctl container by name and by the alias address.
func checkNerdctlHostAccess(t *testing.T, e *env, nerdctl func(time.Duration, ...string) string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, target := range []struct {
		name string
		args []string
	}{
		{"host.docker.internal", nil},
		{"10.254.254.254", nil},
		{"host.docker.internal", []string{"--add-host", "host.docker.internal:host-gateway"}},
	} {
		e.timed(fmt.Sprintf("nerdctl container reaches host loopback via %s %v", target.name, target.args), func(t *testing.T) {
			got := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- "accept: " + err.Error()
					return
				}
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(2 * time.Minute))
				b, _ := io.ReadAll(io.LimitReader(c, 64))
				got <- string(b)
			}()
			args := append([]string{"run", "--rm"}, target.args...)
			args = append(args, "vmdock-test:latest", "/bin/busybox", "sh", "-c", fmt.Sprintf("printf xdebug-init | nc -w 30 %s %d", target.name, port))
			nerdctl(3*time.Minute, args...)
			select {
			case g := <-got:
				if g != "xdebug-init" {
					t.Fatalf("host received %q", g)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("no connection arrived on the host listener")
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
