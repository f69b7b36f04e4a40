//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkIPv6AndDockerSock runs while checkPorts' "web"
// container publishes 18080 (the test image's HTTP server) and 18081/udp
// (its echo): a client that reaches localhost over IPv6 gets the port
// too, and `docker-sock link` makes a working docker socket at a path of
// the test's (never the real /var/run/docker.sock).
func checkIPv6AndDockerSock(t *testing.T, e *env) {
	e.timed("published port answers on [::1] and localhost (curl)", func(t *testing.T) {
		if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
			t.Skipf("this host has no IPv6 loopback: %v", err)
		} else {
			ln.Close()
		}
		for _, target := range []struct{ url, family string }{
			{"http://[::1]:18080/", ""},
			{"http://localhost:18080/", "-6"},
			{"http://localhost:18080/", "-4"},
			{"http://localhost:18080/", ""},
		} {
			body, err := fetchURL(target.url, target.family)
			if err != nil || body != "vmdock-test-ok\n" {
				t.Errorf("GET %s %s: %q, %v", target.family, target.url, body, err)
			}
		}
		c, err := net.Dial("udp", "[::1]:18081")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		echoed := false
		buf := make([]byte, 64)
		for i := 0; i < 20 && !echoed; i++ {
			c.Write([]byte("udp6-ping"))
			c.SetReadDeadline(time.Now().Add(time.Second))
			n, err := c.Read(buf)
			echoed = err == nil && string(buf[:n]) == "udp6-ping"
		}
		if !echoed {
			t.Error("no UDP echo from the container through [::1]:18081")
		}
		var st struct {
			HostAgent struct {
				Ports []struct {
					Proto     string   `json:"proto"`
					GuestPort int      `json:"guestPort"`
					HostAddrs []string `json:"hostAddrs"`
					Warning   string   `json:"warning"`
					Error     string   `json:"error"`
				} `json:"ports"`
			} `json:"hostAgent"`
		}
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v", err)
		}
		found := false
		for _, p := range st.HostAgent.Ports {
			if p.Proto == "tcp" && p.GuestPort == 18080 {
				found = true
				if !slices.Equal(p.HostAddrs, []string{"127.0.0.1:18080", "[::1]:18080"}) || p.Warning != "" {
					t.Errorf("status --json port tcp/18080: hostAddrs %q, warning %q, error %q; want both loopbacks, no warning", p.HostAddrs, p.Warning, p.Error)
				}
			}
		}
		if !found {
			t.Errorf("status --json lists no tcp/18080:\n%s", out)
		}
	})

	e.timed("docker-sock link at an overridden path works with docker -H; unlink removes only its link", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "docker.sock")
		theirs := filepath.Join(t.TempDir(), "docker.sock")
		if err := os.WriteFile(theirs, []byte("not vmdock's"), 0o644); err != nil {
			t.Fatal(err)
		}
		saved := e.extraEnv
		defer func() { e.extraEnv = saved }()
		at := func(path string) { e.extraEnv = append(slices.Clone(saved), "VMDOCK_DOCKER_SOCK_PATH="+path) }

		at(link)
		out := e.run(time.Minute, e.vmdock, "docker-sock", "link")
		if !strings.Contains(out, "linked "+link) || !strings.Contains(out, "live") {
			t.Fatalf("docker-sock link printed %q, want linked %s and live", out, link)
		}
		if got, _ := os.Readlink(link); got != filepath.Join(e.home, "default", "docker.sock") {
			t.Fatalf("%s points at %q, want the instance's docker socket", link, got)
		}
		ver := strings.TrimSpace(e.run(2*time.Minute, "docker", "-H", "unix://"+link, "version", "--format", "{{.Server.Version}}"))
		if ver == "" {
			t.Fatal("docker -H unix://LINK version printed no server version")
		}
		t.Logf("docker -H unix://%s version: server %s", link, ver)

		at(theirs)
		for _, verb := range []string{"link", "unlink"} {
			out, errOut, err := e.try(time.Minute, e.vmdock, "docker-sock", verb)
			if err == nil || !strings.Contains(errOut, "refusing") || !strings.Contains(errOut, theirs) || !strings.Contains(errOut, "a regular file") {
				t.Errorf("docker-sock %s over a regular file: %v\nstdout: %s\nstderr: %s", verb, err, out, errOut)
			}
		}
		if b, err := os.ReadFile(theirs); err != nil || string(b) != "not vmdock's" {
			t.Errorf("the regular file at %s now holds %q (%v)", theirs, b, err)
		}

		at(link)
		if out := e.run(time.Minute, e.vmdock, "docker-sock", "unlink"); !strings.Contains(out, "removed "+link) {
			t.Errorf("docker-sock unlink printed %q", out)
		}
		if _, err := os.Lstat(link); err == nil {
			t.Errorf("%s still there after unlink", link)
		}
		if out := e.run(time.Minute, e.vmdock, "docker-sock", "status"); !strings.Contains(out, "absent") {
			t.Errorf("docker-sock status after unlink: %q", out)
		}
		e.docker(2*time.Minute, "version") // the instance's own socket is untouched
	})
}

// fetchURL GETs url with curl (family "-4" or "-6" forces one, as a
// client resolving localhost to that family would) or, without curl and
// without a family, Go's client.
func fetchURL(url, family string) (string, error) {
	if _, err := exec.LookPath("curl"); err != nil {
		if family != "" {
			return "", fmt.Errorf("curl not installed: %w", err)
		}
		return httpGet(url)
	}
	args := []string{"-sS", "--max-time", "10"}
	if family != "" {
		args = append(args, family)
	}
	out, err := exec.Command("curl", append(args, url)...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return string(out), err
}
