//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostSSHAgent is a real ssh-agent on the host holding one throwaway key,
// and a static linux/amd64 program (listerDir/list) that lists an agent's
// keys, for containers that have no ssh-add.
type hostSSHAgent struct {
	sock        string
	fingerprint string // SHA256:..., as ssh-keygen -lf prints it
	listerDir   string
}

// startHostSSHAgent starts ssh-agent with a new ed25519 key and makes the
// commands e runs (vmdock start above all) see it as SSH_AUTH_SOCK.
func startHostSSHAgent(e *env) *hostSSHAgent {
	a := &hostSSHAgent{}
	e.timed("ssh-agent on the host with a throwaway key", func(t *testing.T) {
		// Not t.TempDir: a unix socket path has room for ~100 bytes.
		dir, err := os.MkdirTemp("", "e2e-ssh")
		if err != nil {
			t.Fatal(err)
		}
		e.t.Cleanup(func() { os.RemoveAll(dir) })
		sock := filepath.Join(dir, "agent.sock")
		agent := exec.Command("ssh-agent", "-D", "-a", sock)
		if err := agent.Start(); err != nil {
			t.Fatalf("ssh-agent: %v", err)
		}
		e.t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(sock); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ssh-agent made no socket at %s", sock)
			}
		}
		key := filepath.Join(dir, "key")
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vmdock-e2e", "-f", key).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		add := exec.Command("ssh-add", key)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("ssh-add: %v\n%s", err, out)
		}
		out, err := exec.Command("ssh-keygen", "-lf", key+".pub").Output()
		if f := strings.Fields(string(out)); err != nil || len(f) < 2 || !strings.HasPrefix(f[1], "SHA256:") {
			t.Fatalf("ssh-keygen -lf: %q, %v", out, err)
		}
		a.fingerprint = strings.Fields(string(out))[1]
		a.listerDir = filepath.Join(e.work, "ssh-agent-lister")
		buildAgentLister(t, a.listerDir)
		a.sock = sock
		e.extraEnv = append(e.extraEnv, "SSH_AUTH_SOCK="+sock)
	})
	return a
}

// checkSSHAgentInContainer lists the host agent's keys from a container
// running as a non-root user, through the guest's forwarded socket.
func checkSSHAgentInContainer(e *env, a *hostSSHAgent) {
	e.timed("container as uid 1000 lists the host's ssh-agent keys through the guest's forwarded socket", func(t *testing.T) {
		if a.sock == "" {
			t.Fatal("no host ssh-agent: the step that starts it did not run")
		}
		listAgentKeys(t, e, a)
		status := e.run(time.Minute, e.vmdock, "status")
		if want := "/run/host-services/ssh-auth.sock -> " + a.sock; !strings.Contains(status, want) {
			t.Errorf("status does not show the forwarding (%q):\n%s", want, status)
		}
	})
}

// checkSSHAgentAfterAgentRestart: a restarted guest agent makes the socket
// again when the host gives it its services back.
func checkSSHAgentAfterAgentRestart(e *env, a *hostSSHAgent) {
	e.timed("ssh-agent socket works again after the guest agent restarted", func(t *testing.T) {
		if a.sock == "" {
			t.Fatal("no host ssh-agent: the step that starts it did not run")
		}
		// The host gives the services back just after it reconnects.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, _, err := e.try(time.Minute, e.vmdock, "ssh", "--", "test", "-S", "/run/host-services/ssh-auth.sock")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no socket in the guest 30 s after the agent restarts: %v", err)
			}
			time.Sleep(time.Second)
		}
		listAgentKeys(t, e, a)
	})
}

func listAgentKeys(t *testing.T, e *env, a *hostSSHAgent) {
	const sock = "/run/host-services/ssh-auth.sock"
	out := e.docker(3*time.Minute, "run", "--rm", "--user", "1000:1000",
		"-v", sock+":"+sock, "-e", "SSH_AUTH_SOCK="+sock,
		"-v", a.listerDir+":/lister:ro", "vmdock-test:latest", "/lister/list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || lines[0] != "uid 1000" || lines[1] != a.fingerprint {
		t.Fatalf("the container printed %q; want \"uid 1000\" and the key's %s", out, a.fingerprint)
	}
}

// buildAgentLister builds agentLister for the guest into dir/list: static,
// so it runs in the busybox test image.
func buildAgentLister(t *testing.T, dir string) {
	src := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module lister\n\ngo 1.21\n", "main.go": agentLister} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Readable by the container's uid 1000.
	os.Chmod(dir, 0o755)
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "list"), ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the agent lister: %v\n%s", err, out)
	}
}

// agentLister asks the agent at $SSH_AUTH_SOCK for its identities
// (SSH2_AGENTC_REQUEST_IDENTITIES) and prints its uid, then each key's
// fingerprint as ssh-keygen -l does.
const agentLister = `package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func str(b []byte) ([]byte, []byte) {
	if len(b) < 4 || uint32(len(b)-4) < binary.BigEndian.Uint32(b) {
		fail("short string in the answer")
	}
	n := binary.BigEndian.Uint32(b)
	return b[4 : 4+n], b[4+n:]
}

func main() {
	fmt.Printf("uid %d\n", os.Getuid())
	c, err := net.Dial("unix", os.Getenv("SSH_AUTH_SOCK"))
	if err != nil {
		fail("dial the agent: %v", err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte{0, 0, 0, 1, 11}); err != nil {
		fail("request identities: %v", err)
	}
	var head [4]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		fail("read the answer: %v", err)
	}
	n := binary.BigEndian.Uint32(head[:])
	if n < 5 || n > 1<<20 {
		fail("answer of %d bytes", n)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(c, msg); err != nil {
		fail("read the answer: %v", err)
	}
	if msg[0] != 12 {
		fail("answer type %d, want 12 (identities)", msg[0])
	}
	count, rest := binary.BigEndian.Uint32(msg[1:5]), msg[5:]
	for i := uint32(0); i < count; i++ {
		var blob []byte
		blob, rest = str(rest)
		_, rest = str(rest) // the comment
		sum := sha256.Sum256(blob)
		fmt.Println("SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:]))
	}
}
`
