//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// Container domains, checked in the main boot: a browser, curl
// and Go clients reach containers with no published port by name through
// the host's router, on free ports (80/443 may be taken or refused here).

// domainPorts are the router's ports for this run, in the profile's
// domains: section.
type domainPorts struct{ http, https int }

func pickDomainPorts(t *testing.T) domainPorts {
	return domainPorts{http: freeDualStackPort(t), https: freeDualStackPort(t)}
}

func (p domainPorts) configYAML() string {
	return fmt.Sprintf("domains:\n  httpPort: %d\n  httpsPort: %d\n", p.http, p.https)
}

// freeDualStackPort is a TCP port free on 127.0.0.1 and ::1 a moment ago.
func freeDualStackPort(t *testing.T) int {
	for try := 0; try < 20; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln6, err := net.Listen("tcp", net.JoinHostPort("::1", strconv.Itoa(port)))
		ln.Close()
		if err == nil {
			ln6.Close()
			return port
		} else if strings.Contains(err.Error(), "cannot assign requested address") {
			return port // no IPv6 loopback here
		}
	}
	t.Fatal("no TCP port free on both loopback addresses")
	return 0
}

// domainClient sends every request to the router on 127.0.0.1 whatever
// the URL's host, the way browsers and curl resolve *.localhost; the Host
// header and SNI still carry the name.
func domainClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	if caPEM != nil {
		pool.AppendCertsFromPEM(caPEM)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	}
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			DialContext:       dial,
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2: true,
		},
	}
}

func getBody(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitBody polls url until its body contains want, and returns how long
// that took.
func waitBody(t *testing.T, c *http.Client, url, want string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < within {
		code, body, err := getBody(c, url)
		if err == nil && strings.Contains(body, want) {
			return time.Since(start)
		}
		last = fmt.Sprintf("%d %q %v", code, trimTo(body, 300), err)
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %q within %v; last: %s", url, want, within, last)
	return 0
}

func trimTo(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

const okBody = "vmdock-test-ok\n"

func checkDomains(t *testing.T, e *env, ports domainPorts) {
	httpBase := func(name string) string {
		return fmt.Sprintf("http://%s.vmdock.localhost:%d", name, ports.http)
	}
	httpsBase := func(name string) string {
		return fmt.Sprintf("https://%s.vmdock.localhost:%d", name, ports.https)
	}
	// the corporate-network fixture's proxy variables are for the guest;
	// curl, compose and Chromium here must go to the router directly
	n := len(e.extraEnv)
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"} {
		e.extraEnv = append(e.extraEnv, v+"=", strings.ToLower(v)+"=")
	}
	defer func() { e.extraEnv = e.extraEnv[:n] }()
	plain := domainClient(nil)
	var caPath string
	var secure *http.Client

	e.timed("domains: a container with no -p answers by name", func(t *testing.T) {
		e.docker(2*time.Minute, "run", "-d", "--name", "web", "-e", "WHO=web",
			"--label", "dev.vmdock.http-port=80", "vmdock-test:latest")
		// several exposed ports (80, 82) and no port label
		e.docker(2*time.Minute, "run", "-d", "--name", "Multi_Port", "vmdock-test:latest")
		t.Logf("first answer after %v", waitBody(t, plain, httpBase("web")+"/", okBody, time.Minute))
		_, body, err := getBody(plain, httpBase("web")+"/request")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Host: web.vmdock.localhost:" + strconv.Itoa(ports.http) + "\n",
			"X-Forwarded-Proto: http\n",
			"X-Forwarded-For: 127.0.0.1",
			"X-Forwarded-Host: web.vmdock.localhost:" + strconv.Itoa(ports.http),
		} {
			if !strings.Contains(body, want) {
				t.Errorf("the container saw no %q in:\n%s", want, body)
			}
		}
		// a container name made a DNS label; several ports: a page naming them
		code, body, err := getBody(plain, httpBase("multi-port")+"/")
		if err != nil || code == http.StatusOK || !strings.Contains(body, "80") || !strings.Contains(body, "82") || !strings.Contains(body, "dev.vmdock.http-port") {
			t.Errorf("several exposed ports gave %d %q %v, want an error page naming 80, 82 and the label", code, trimTo(body, 400), err)
		}
		start := time.Now()
		code, body, err = getBody(plain, httpBase("nothing-here")+"/")
		if err != nil || code != http.StatusNotFound || time.Since(start) > 2*time.Second {
			t.Errorf("an unknown name gave %d %q %v after %v, want 404 at once", code, trimTo(body, 300), err, time.Since(start))
		}
	})

	e.timed("domains: vmdock domains trust, then Chromium opens http and https pages", func(t *testing.T) {
		caPath = strings.TrimSpace(e.run(time.Minute, e.vmdock, "domains", "ca"))
		caPEM, err := os.ReadFile(caPath)
		if err != nil {
			t.Fatal(err)
		}
		secure = domainClient(caPEM)
		// a throwaway home: its NSS database is the one Chromium reads
		home := t.TempDir()
		sysDir := t.TempDir()
		n := len(e.extraEnv)
		e.extraEnv = append(e.extraEnv, "HOME="+home, "VMDOCK_CA_SYSTEM_DIR="+sysDir)
		out := e.run(2*time.Minute, e.vmdock, "domains", "trust")
		e.extraEnv = e.extraEnv[:n]
		t.Logf("domains trust:\n%s", out)
		if _, err := os.Stat(filepath.Join(home, ".pki", "nssdb", "cert9.db")); err != nil {
			t.Fatalf("no NSS database in the redirected home: %v", err)
		}
		chromium := func(done func(stdout string) bool, args ...string) (string, error) {
			return runChromium(t, e, home, done, args...)
		}
		domDumped := func(stdout string) bool { return strings.Contains(stdout, "</html>") }
		const pageText = "vmdock container domains work"
		for _, url := range []string{httpBase("web") + "/page", httpsBase("web") + "/page"} {
			var dom string
			var err error
			for try := 0; try < 3 && !strings.Contains(dom, pageText); try++ {
				dom, err = chromium(domDumped, "--dump-dom", url)
			}
			if !strings.Contains(dom, pageText) {
				t.Errorf("Chromium shows no %q at %s (%v):\n%s", pageText, url, err, trimTo(dom, 1000))
			}
		}
		shot := filepath.Join(e.repo, "bin", "e2e-domains-chromium.png")
		os.MkdirAll(filepath.Dir(shot), 0o755)
		os.Remove(shot)
		for try := 0; try < 3; try++ {
			shotWritten := func(string) bool { return wholePNG(shot) }
			if _, err := chromium(shotWritten, "--screenshot="+shot, "--window-size=900,400", httpsBase("web")+"/page"); err == nil {
				break
			}
		}
		if fi, err := os.Stat(shot); err != nil || fi.Size() < 1000 {
			t.Errorf("screenshot %s: %v", shot, err)
		} else {
			t.Logf("screenshot: %s (%d bytes)", shot, fi.Size())
		}
	})

	e.timed("domains: curl over HTTP/2 with the CA, a WebSocket echo, server-sent events", func(t *testing.T) {
		out := e.run(time.Minute, "curl", "-sS", "--noproxy", "*", "--http2", "--cacert", caPath, "-w", "\n%{http_version}",
			httpsBase("web")+"/request")
		if !strings.HasSuffix(out, "\n2") || !strings.Contains(out, "X-Forwarded-Proto: https\n") {
			t.Errorf("curl --http2 https://web...: want HTTP version 2 and X-Forwarded-Proto https, got:\n%s", out)
		}
		for _, base := range []string{httpBase("web"), httpsBase("web")} {
			checkWebSocketEcho(t, base, caPath)
		}
		// the first event comes through long before the response ends
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", httpsBase("web")+"/events?n=2&gap=45s", nil)
		resp, err := secure.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "data: event 1\n" {
			t.Errorf("first server-sent event = %q, %v; want it before the 45 s gap", line, err)
		}
	})

	e.timed("domains: a 50 MB upload through https arrives whole", func(t *testing.T) {
		payload := make([]byte, 50<<20)
		rand.Read(payload)
		sum := sha256.Sum256(payload)
		resp, err := secure.Post(httpsBase("web")+"/upload", "application/octet-stream", strings.NewReader(string(payload)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("%d %x\n", len(payload), sum); string(b) != want {
			t.Fatalf("upload answer %q, want %q", b, want)
		}
	})

	e.timed("domains: a container reaches another by name through the router", func(t *testing.T) {
		out := e.docker(2*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "wget", "-q", "-O", "-",
			httpBase("web")+"/")
		if out != okBody {
			t.Fatalf("container → %s/: %q", httpBase("web"), out)
		}
	})

	e.timed("domains: a label wins a name, vmdock domains --json shows the conflict", func(t *testing.T) {
		e.docker(2*time.Minute, "run", "-d", "--name", "shadow", "-e", "WHO=shadow",
			"--label", "dev.vmdock.domains=web.vmdock.localhost,shadow-alias.vmdock.localhost",
			"--label", "dev.vmdock.http-port=80", "vmdock-test:latest")
		waitBody(t, plain, httpBase("web")+"/env", "WHO=shadow", 30*time.Second)
		var l struct {
			Routes []struct {
				Name, Container, Source string
				Port                    int
			}
			Conflicts []struct {
				Name   string
				Winner struct{ Container string }
				Losers []struct{ Container string }
			}
			Listening []string
		}
		out := e.run(time.Minute, e.vmdock, "domains", "--json")
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("domains --json: %v\n%s", err, out)
		}
		found := false
		for _, c := range l.Conflicts {
			if c.Name == "web.vmdock.localhost" && strings.TrimPrefix(c.Winner.Container, "/") == "shadow" &&
				len(c.Losers) == 1 && strings.TrimPrefix(c.Losers[0].Container, "/") == "web" {
				found = true
			}
		}
		if !found {
			t.Errorf("domains --json shows no conflict web.vmdock.localhost won by shadow over web:\n%s", out)
		}
		routes := map[string]string{}
		for _, r := range l.Routes {
			routes[r.Name] = fmt.Sprintf("%s/%s/%d", strings.TrimPrefix(r.Container, "/"), r.Source, r.Port)
		}
		if routes["shadow-alias.vmdock.localhost"] != "shadow/label/80" || routes["web.vmdock.localhost"] != "shadow/label/80" {
			t.Errorf("routes %v", routes)
		}
		if len(l.Listening) == 0 {
			t.Errorf("domains --json names no listening address:\n%s", out)
		}
		e.docker(time.Minute, "rm", "-f", "shadow")
		waitBody(t, plain, httpBase("web")+"/env", "WHO=web", 30*time.Second)
	})

	e.timed("domains: a compose service answers as <service>.<project>", func(t *testing.T) {
		dir := t.TempDir()
		compose := "services:\n  api:\n    image: vmdock-test:latest\n    labels:\n      dev.vmdock.http-port: \"80\"\n"
		if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte(compose), 0o644); err != nil {
			t.Fatal(err)
		}
		run := composeCommand(t, e)
		e.run(3*time.Minute, run[0], append(run[1:], "-p", "shop", "-f", filepath.Join(dir, "docker-compose.yml"), "up", "-d")...)
		waitBody(t, plain, httpBase("api.shop")+"/", okBody, time.Minute)
		e.run(3*time.Minute, run[0], append(run[1:], "-p", "shop", "-f", filepath.Join(dir, "docker-compose.yml"), "down")...)
	})

	e.timed("domains: docker run -p on the router's port wins it, and the router takes it back", func(t *testing.T) {
		direct := fmt.Sprintf("http://127.0.0.1:%d/env", ports.http)
		e.docker(2*time.Minute, "run", "-d", "--name", "published", "-e", "WHO=published",
			"-p", fmt.Sprintf("%d:80", ports.http), "vmdock-test:latest")
		t.Logf("the published port answered after %v", waitBody(t, plain, direct, "WHO=published", time.Minute))
		e.docker(time.Minute, "rm", "-f", "published")
		t.Logf("the router answered again after %v", waitBody(t, plain, httpBase("web")+"/", okBody, 30*time.Second))
	})

	e.timed("domains: a removed container's name is gone within 2 s", func(t *testing.T) {
		e.docker(time.Minute, "rm", "-f", "web", "Multi_Port")
		start := time.Now()
		for {
			code, body, err := getBody(plain, httpBase("web")+"/")
			if err == nil && code == http.StatusNotFound {
				break
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("2 s after docker rm, web answers %d %q %v", code, trimTo(body, 200), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("gone %v after docker rm returned", time.Since(start))
	})
}

// runChromium runs headless Chromium with a throwaway profile in home and
// ends it as soon as done says what it was asked for is written (done
// sees its output so far): it can hang on exit after the page loaded (seen
// here after a finished --dump-dom), so the 45 s limit is only for a page
// that never comes. What it printed counts even when it had to be killed.
func runChromium(t *testing.T, e *env, home string, done func(stdout string) bool, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium", append([]string{"--headless", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--user-data-dir=" + filepath.Join(home, "chromium")}, args...)...)
	cmd.Env = append(e.environ(), "HOME="+home)
	// Its own process group, ended whole: the renderer and the other
	// helpers would otherwise outlive the browser and hold its output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout lockedBuffer
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ended := false // by us, once done said so
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-exited:
			waiting = false
		case <-tick.C:
			if !ended && done(stdout.String()) {
				ended = true
				cancel()
			}
		}
	}
	if ended {
		err = nil
	}
	t.Logf("chromium %v: %v after %v (ended once written: %v)", args, err, time.Since(start).Round(time.Millisecond), ended)
	if err != nil {
		err = fmt.Errorf("%w: %s", err, trimTo(stderr.String(), 1500))
	}
	return stdout.String(), err
}

// lockedBuffer is a process's output, read while the process writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// wholePNG reports whether path holds a complete PNG: its signature and,
// last, the IEND chunk (its CRC included), so a file still being written
// does not count.
func wholePNG(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) &&
		bytes.HasSuffix(b, []byte("\x00\x00\x00\x00IEND\xaeB`\x82"))
}

// composeCommand is docker compose v2 if the CLI has it, else Debian 12's
// docker-compose (v1), pointed at the instance's docker socket.
func composeCommand(t *testing.T, e *env) []string {
	if _, _, err := e.try(time.Minute, "docker", "compose", "version"); err == nil {
		return []string{"docker", "--context", "vmdock", "compose"}
	}
	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Fatal("neither docker compose nor docker-compose is installed (hack/deps.sh installs docker-compose)")
	}
	e.extraEnv = append(e.extraEnv, "DOCKER_HOST=unix://"+filepath.Join(e.home, "default", "docker.sock"))
	t.Cleanup(func() { e.extraEnv = e.extraEnv[:len(e.extraEnv)-1] })
	return []string{"docker-compose"}
}

// checkWebSocketEcho opens base's /ws through the router and has a
// message echoed.
func checkWebSocketEcho(t *testing.T, base, caPath string) {
	t.Helper()
	u := "ws" + strings.TrimPrefix(base, "http") + "/ws"
	cfg, err := websocket.NewConfig(u, "http://elsewhere.vmdock.localhost")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(cfg.Location.Host)
	raw, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(time.Minute))
	conn := raw
	if strings.HasPrefix(base, "https") {
		pem, _ := os.ReadFile(caPath)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tc := tls.Client(raw, &tls.Config{ServerName: cfg.Location.Hostname(), RootCAs: pool, NextProtos: []string{"http/1.1"}})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("%s: TLS: %v", u, err)
		}
		conn = tc
	}
	ws, err := websocket.NewClient(cfg, conn)
	if err != nil {
		t.Fatalf("%s: handshake: %v", u, err)
	}
	msg := "echo through " + base
	if _, err := ws.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, err := ws.Read(buf)
	if err != nil || string(buf[:n]) != msg {
		t.Fatalf("%s echoed %q, %v; want %q", u, buf[:n], err, msg)
	}
}
