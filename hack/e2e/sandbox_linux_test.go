//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// TestE2ESandbox boots one sandbox (the default profile, made by
// `vmdock sandbox create`) in the default network mode, in network and
// mount namespaces of its own whose outside (ownnetwork_test.go) holds an
// allowed web server, a name and an address that are not allowed, and an
// HTTPS API whose key the sandbox uses without ever holding it. Through
// the real guest: egress refused at once and logged, the injected key
// seen by the server and found in no file and no process environment of
// the guest, diff, accept (with a conflicting host edit) and reject,
// edits kept over a forced stop, published ports, and the MCP server's
// tools over a real stdio pipe with a command's timeout.
func TestE2ESandbox(t *testing.T) {
	if os.Getenv("VMDOCK_E2E_SANDBOX") != "1" {
		t.Skip("set VMDOCK_E2E_SANDBOX=1 to boot a sandbox")
	}
	if !inOwnNetwork(t) {
		return
	}
	e, base := newEnv(t, "amd64")
	defer e.printTimings()
	own := setUpOwnNetwork(t, base)
	api := startSecretAPI(t, own)
	ws := filepath.Join(base, "agent workspace")
	must(t, os.MkdirAll(filepath.Join(ws, "src"), 0o755))
	for name, body := range map[string]string{"edit.txt": "v1\n", "conflict.txt": "v1\n", "src/keep.txt": "keep\n"} {
		writeFile(t, filepath.Join(ws, name), []byte(body))
	}
	token := randomToken(t)
	e.extraEnv = append(e.extraEnv, sandboxTokenEnv+"="+token, "SSL_CERT_FILE="+api.caFile)
	e.run(time.Minute, e.vmdock, "sandbox", "create", "default", "--workspace", ws,
		"--allow", corpName+":8080", "--secret", "api="+sandboxTokenEnv+"@"+sandboxAPIName, "--no-start")
	e.t.Cleanup(func() { e.try(3*time.Minute, e.vmdock, "stop", "--force") })
	startArgs := []string{"start", "--cpus", "1", "--memory", "2", "--image", "vmdock"}
	e.timed("vmdock start of the sandbox (cold boot)", func(t *testing.T) {
		e.run(15*time.Minute, e.vmdock, startArgs...)
	})
	checkSandboxEgress(t, e, own)
	checkSandboxSecret(t, e, api, token)
	checkSandboxReview(t, e, ws, startArgs)
	checkSandboxPorts(t, e)
	checkSandboxMCP(t, e)
	e.timed("vmdock stop", func(t *testing.T) { e.run(5*time.Minute, e.vmdock, "stop") })
	t.Log(e.boots.line())
}

const (
	sandboxTokenEnv = "VMDOCK_E2E_API_TOKEN"
	// sandboxWebPort is the sandbox's published port (ports_test.go).
	sandboxWebPort = 18580
)

func randomToken(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "vmdock-e2e-" + hex.EncodeToString(b)
}

// guest runs a bash script in the sandbox through `vmdock ssh`.
func (e *env) guest(t *testing.T, script string) string {
	t.Helper()
	out, errOut, err := e.try(3*time.Minute, e.vmdock, "ssh", "--", "bash", "-c", script)
	if err != nil {
		t.Fatalf("in the sandbox: %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, out, errOut)
	}
	return out
}

// checkSandboxEgress: the allowed name resolves and its port answers; a
// name not allowed gets no answer (and the outside's resolver is never
// asked), an address not allowed is refused at once, though it answers
// the host; both are in `sandbox log`.
func checkSandboxEgress(t *testing.T, e *env, own *ownNetwork) {
	deniedAddr := fmt.Sprintf("%s:%d", corpIP2, corpWebPort)
	e.timed("egress: the allowed host answers, the rest is refused at once and logged", func(t *testing.T) {
		if out := e.guest(t, "getent hosts "+corpName); !strings.HasPrefix(out, corpIP) {
			t.Errorf("getent hosts %s in the sandbox: %q, want %s", corpName, out, corpIP)
		}
		out := e.guest(t, fmt.Sprintf(`exec 3<>/dev/tcp/%s/%d && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3`, corpName, corpWebPort))
		if !strings.Contains(out, corpWebBody) {
			t.Errorf("the allowed web server through the sandbox: %q, want %q", out, corpWebBody)
		}
		if out, _, err := e.try(time.Minute, e.vmdock, "ssh", "--", "getent", "hosts", corpRegistryName); err == nil {
			t.Errorf("getent hosts %s, a name not allowed, answered %q", corpRegistryName, out)
		}
		if own.queried(t, corpRegistryName) {
			t.Errorf("the host's resolver was asked for %s, a name not allowed", corpRegistryName)
		}
		// The address answers from the host: only egress can refuse it.
		if body, err := httpGet("http://" + deniedAddr + "/"); err != nil || !strings.Contains(body, corpWebBody) {
			t.Fatalf("%s from the host: %q, %v", deniedAddr, body, err)
		}
		out = e.guest(t, fmt.Sprintf(`a=$(date +%%s%%N); if timeout 60 bash -c 'exec 3<>/dev/tcp/%s/%d' 2>/dev/null; then echo CONNECTED; fi; echo ms=$(( ($(date +%%s%%N) - a) / 1000000 ))`,
			corpIP2, corpWebPort))
		t.Logf("the refused connection: %s", strings.TrimSpace(out))
		if strings.Contains(out, "CONNECTED") {
			t.Errorf("the sandbox connected to %s, which is not allowed", deniedAddr)
		}
		var ms int
		if _, err := fmt.Sscanf(out[strings.LastIndex(out, "ms="):], "ms=%d", &ms); err != nil || ms > 10_000 {
			t.Errorf("the refusal took %d ms (%v): want a reset at once, not a timeout", ms, err)
		}
		log := e.run(time.Minute, e.vmdock, "sandbox", "log", "default")
		for _, want := range []string{deniedAddr, corpRegistryName} {
			if !strings.Contains(log, want) {
				t.Errorf("sandbox log lacks %s:\n%s", want, log)
			}
		}
	})
}

// checkSandboxSecret: a request from the guest to the secret's host
// reaches the server with the host's key in place of the guest's, over
// TLS the guest checked against its store; the key is in no file of the
// guest and no process's environment.
func checkSandboxSecret(t *testing.T, e *env, api *secretAPI, token string) {
	e.timed("secret: the key is added on the way out and found nowhere in the guest", func(t *testing.T) {
		req := `printf 'GET /whoami HTTP/1.1\r\nHost: %[1]s\r\nAuthorization: Bearer guessed\r\nConnection: close\r\n\r\n' | ` +
			`openssl s_client -quiet -verify_return_error -CAfile /etc/ssl/certs/ca-certificates.crt -servername %[1]s -connect %[1]s:443 2>&1`
		out := e.guest(t, fmt.Sprintf(req, sandboxAPIName))
		if !strings.Contains(out, secretAPIAnswer) {
			t.Errorf("the API through the sandbox answered:\n%s", out)
		}
		if got := api.authorizations(); len(got) == 0 || got[len(got)-1] != "Bearer "+token {
			t.Errorf("the server saw Authorization %q, want the host's key", got)
		}
		// The key is decoded in the shell, so no file holds it; the grep's
		// own argv holds it, and /proc is searched only for environments.
		enc := base64.StdEncoding.EncodeToString([]byte(token))
		found := e.guest(t, `S=$(echo `+enc+` | base64 -d)
for d in /*; do case $d in /proc|/sys|/dev) continue;; esac; grep -rlsF --devices=skip -e "$S" "$d"; done
for f in /proc/[0-9]*/environ; do grep -lsF -e "$S" "$f"; done
echo searched`)
		if strings.TrimSpace(found) != "searched" {
			t.Errorf("the key is in the guest:\n%s", found)
		}
	})
}

// checkSandboxReview: the agent's edits are shown, accepted but for the
// path the host changed too, which reject gives the host's version; an
// edit not yet reviewed is still there after a forced stop and a start.
func checkSandboxReview(t *testing.T, e *env, ws string, startArgs []string) {
	e.timed("review: diff, accept with a conflicting host edit, reject", func(t *testing.T) {
		e.guest(t, fmt.Sprintf(`cd %q && echo agent > edit.txt && echo agent > conflict.txt && echo new > src/new.txt`, ws))
		writeFile(t, filepath.Join(ws, "conflict.txt"), []byte("host\n"))
		diff := e.run(time.Minute, e.vmdock, "sandbox", "diff", "default")
		for _, want := range []string{"+agent", "edit.txt", "src/new.txt", "conflict.txt"} {
			if !strings.Contains(diff, want) {
				t.Errorf("sandbox diff lacks %q:\n%s", want, diff)
			}
		}
		out, errOut, err := e.try(time.Minute, e.vmdock, "sandbox", "accept", "default")
		if err == nil || !strings.Contains(out+errOut, "conflict.txt") {
			t.Errorf("accept with a conflict: err %v, want a refusal naming conflict.txt:\n%s%s", err, out, errOut)
		}
		for name, want := range map[string]string{"edit.txt": "agent\n", "src/new.txt": "new\n", "conflict.txt": "host\n"} {
			if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
				t.Errorf("the host's %s after accept: %q, %v; want %q", name, b, err, want)
			}
		}
		e.run(time.Minute, e.vmdock, "sandbox", "reject", "default", "conflict.txt")
		if got := e.guest(t, fmt.Sprintf("cat %q", filepath.Join(ws, "conflict.txt"))); got != "host\n" {
			t.Errorf("the guest's conflict.txt after reject: %q, want the host's", got)
		}
	})
	e.timed("an edit not yet reviewed survives a forced stop and a start", func(t *testing.T) {
		e.guest(t, fmt.Sprintf(`echo unreviewed > %q`, filepath.Join(ws, "unreviewed.txt")))
		e.run(5*time.Minute, e.vmdock, "stop", "--force")
		e.run(15*time.Minute, e.vmdock, startArgs...)
		if got := e.guest(t, fmt.Sprintf("cat %q", filepath.Join(ws, "unreviewed.txt"))); got != "unreviewed\n" {
			t.Errorf("the guest's unreviewed.txt after a forced stop: %q", got)
		}
		if diff := e.run(time.Minute, e.vmdock, "sandbox", "diff", "default"); !strings.Contains(diff, "unreviewed.txt") {
			t.Errorf("sandbox diff after a forced stop lacks unreviewed.txt:\n%s", diff)
		}
		if _, err := os.Stat(filepath.Join(ws, "unreviewed.txt")); !os.IsNotExist(err) {
			t.Errorf("unreviewed.txt reached the host without accept (%v)", err)
		}
	})
}

// checkSandboxPorts: the sandbox's Docker engine publishes on the host's
// loopback, as any instance's.
func checkSandboxPorts(t *testing.T, e *env) {
	e.timed("docker load and a published port", func(t *testing.T) {
		e.docker(5*time.Minute, "load", "-i", e.testTar)
		e.docker(3*time.Minute, "run", "-d", "--name", "web", "-p", fmt.Sprintf("%d:80", sandboxWebPort), "vmdock-test:latest")
		waitForTestServer(t, sandboxWebPort, time.Minute)
	})
}

// checkSandboxMCP drives `vmdock mcp serve` through the SDK's client on a
// real stdio pipe: run (exit code, output, a timeout that ends the
// command in the guest), write_file and read_file.
func checkSandboxMCP(t *testing.T, e *env) {
	e.timed("mcp serve: run with a timeout, write and read a file", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.Command(e.vmdock, "mcp", "serve", "default")
		cmd.Env = e.environ()
		cmd.Stderr = os.Stderr
		client := mcp.NewClient(&mcp.Implementation{Name: "vmdock-e2e", Version: "1"}, nil)
		session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect to vmdock mcp serve: %v", err)
		}
		defer session.Close()
		var run struct {
			ExitCode int
			Output   string
			TimedOut bool
		}
		mcpCall(ctx, t, session, "run", map[string]any{"command": "echo from-guest; uname -s; exit 3"}, &run)
		if run.ExitCode != 3 || !strings.Contains(run.Output, "from-guest") || !strings.Contains(run.Output, "Linux") {
			t.Errorf("run: %+v", run)
		}
		began := time.Now()
		mcpCall(ctx, t, session, "run", map[string]any{"command": "sleep 61; echo late", "timeoutSeconds": 3}, &run)
		t.Logf("the timed-out run returned after %s", time.Since(began).Round(time.Millisecond))
		if !run.TimedOut || strings.Contains(run.Output, "late") {
			t.Errorf("run past its timeout: %+v", run)
		}
		waitNoGuestProcess(t, e, "sleep 61")
		mcpCall(ctx, t, session, "write_file", map[string]any{"path": "src/from-mcp.txt", "content": "mcp\n"}, nil)
		var read struct{ Text string }
		mcpCall(ctx, t, session, "read_file", map[string]any{"path": "src/from-mcp.txt"}, &read)
		if read.Text != "mcp\n" {
			t.Errorf("read_file of what write_file wrote: %q", read.Text)
		}
	})
}

func mcpCall(ctx context.Context, t *testing.T, s *mcp.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("mcp %s: %v", tool, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		t.Fatalf("mcp %s: %s", tool, strings.Join(text, "; "))
	}
	if out == nil {
		return
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		t.Fatalf("mcp %s's result %s: %v", tool, b, err)
	}
}

// waitNoGuestProcess waits for the guest to have no process whose command
// line holds pattern: a command past its timeout must end, not linger.
func waitNoGuestProcess(t *testing.T, e *env, pattern string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		// The brackets keep pgrep's own sh from matching.
		p := "[" + pattern[:1] + "]" + pattern[1:]
		out, _, _ := e.try(time.Minute, e.vmdock, "ssh", "--", "sh", "-c", "pgrep -af '"+p+"' || true")
		if strings.TrimSpace(out) == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the command is still running in the guest after its timeout:\n%s", out)
			return
		}
	}
}

// secretAPIAnswer is what the secret's host answers a request.
const secretAPIAnswer = "vmdock-e2e-api-ok"

// secretAPI is an HTTPS server on corpIP:443 in the outside's namespace,
// for sandboxAPIName, that keeps the Authorization header of each request.
type secretAPI struct {
	caFile string // its CA, the only one the host agent trusts in this test
	mu     sync.Mutex
	auth   []string
}

func (a *secretAPI) authorizations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.auth...)
}

func startSecretAPI(t *testing.T, own *ownNetwork) *secretAPI {
	t.Helper()
	ca, err := newTestCA("vmdock e2e API CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.issue(sandboxAPIName)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	api := &secretAPI{caFile: filepath.Join(own.dir, "api-ca.pem")}
	writeFile(t, api.caFile, ca.certPEM)
	ln := listenInNamespace(t, corpNS, corpIP+":443")
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			api.mu.Lock()
			api.auth = append(api.auth, r.Header.Get("Authorization"))
			api.mu.Unlock()
			fmt.Fprintln(w, secretAPIAnswer)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return api
}

// listenInNamespace opens a TCP listener in the named network namespace:
// a socket stays in the namespace it was made in. The goroutine that
// enters it keeps its OS thread locked to the end, so the thread is
// thrown away after it and runs nothing else in that namespace.
func listenInNamespace(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		target, err := os.Open(filepath.Join("/var/run/netns", ns))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter %s: %w", ns, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns, r.err)
	}
	return r.ln
}
