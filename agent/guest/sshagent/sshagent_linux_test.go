package sshagent

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
)

// echoSSHAgentHost stands for the host's agent: each stream echoes what
// it gets until the guest ends it. It counts the streams it was asked for.
func echoSSHAgentHost(s *Relay) *atomic.Int32 {
	var n atomic.Int32
	s.OpenToHost = func(req agent.Request) (net.Conn, error) {
		if req.Op != agent.OpSSHAgent {
			return nil, fmt.Errorf("op %q", req.Op)
		}
		n.Add(1)
		guest, host := net.Pipe()
		go func() {
			defer host.Close()
			io.Copy(host, host)
		}()
		return guest, nil
	}
	return &n
}

// roundTrip sends msg on c and reads it back.
func roundTrip(c net.Conn, msg string) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != msg {
		return fmt.Errorf("got %q back, want %q", got, msg)
	}
	return nil
}

func TestSSHAgentSocketFollowsSetup(t *testing.T) {
	s, _ := newTestServer(t)
	streams := echoSSHAgentHost(s)
	sock := filepath.Join(s.Root, agent.GuestSSHAgentSocket)

	must(t, s.Setup(true))
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatalf("no socket after setup with sshAgent: %v", err)
	}
	// Containers run as any user: everyone must be able to connect.
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o666 {
		t.Fatalf("%s is %v, want a socket with mode 0666", sock, fi.Mode())
	}
	if di, _ := os.Stat(filepath.Dir(sock)); di == nil || di.Mode().Perm()&0o005 != 0o005 {
		t.Fatalf("socket folder is not open to everyone: %v", di)
	}
	conn, err := net.Dial("unix", sock)
	must(t, err)
	must(t, roundTrip(conn, "\x00\x00\x00\x01\x0b"))
	conn.Close()
	if n := streams.Load(); n != 1 {
		t.Fatalf("the host saw %d ssh-agent streams, want 1", n)
	}

	// Setup again (a reconnect) keeps the same socket, so containers that
	// mounted it keep working.
	must(t, s.Setup(true))
	if again, err := os.Lstat(sock); err != nil || !os.SameFile(fi, again) {
		t.Fatalf("a second setup replaced the socket: %v", err)
	}
	// One that was removed is made again.
	must(t, os.Remove(sock))
	must(t, s.Setup(true))
	conn, err = net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("socket not made again after it was removed: %v", err)
	}
	must(t, roundTrip(conn, "again"))
	conn.Close()

	must(t, s.Setup(false))
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket still there with sshAgent false: %v", err)
	}
}

// A guest agent that restarted finds its predecessor's socket file; the
// new one must take its place, and turning the agent off must remove it
// even though no listener of this process made it.
func TestSSHAgentReplacesAStaleSocket(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("sshAgent=", on), func(t *testing.T) {
			s, _ := newTestServer(t)
			sock := filepath.Join(s.Root, agent.GuestSSHAgentSocket)
			must(t, os.MkdirAll(filepath.Dir(sock), 0o755))
			old, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
			must(t, err)
			old.SetUnlinkOnClose(false)
			old.Close() // the old process is gone; its file stays
			must(t, s.Setup(on))
			if s.listener != nil {
				defer s.listener.close()
			}
			_, err = net.Dial("unix", sock)
			if on && err != nil {
				t.Fatalf("stale socket not replaced: %v", err)
			}
			if _, serr := os.Lstat(sock); !on && !os.IsNotExist(serr) {
				t.Fatalf("stale socket left with sshAgent false: %v", serr)
			}
		})
	}
}

func TestSSHAgentLeavesAFileThatIsNoSocket(t *testing.T) {
	s, _ := newTestServer(t)
	sock := filepath.Join(s.Root, agent.GuestSSHAgentSocket)
	must(t, os.MkdirAll(filepath.Dir(sock), 0o755))
	must(t, os.WriteFile(sock, []byte("mine"), 0o644))
	err := s.Setup(true)
	if err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Fatalf("setup over a regular file: %v, want an error saying it is not a socket", err)
	}
	if b, _ := os.ReadFile(sock); string(b) != "mine" {
		t.Fatalf("the file was touched: %q", b)
	}
}

// lockedBuffer is a log sink the accept loop and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestSSHAgentConnectionLimit(t *testing.T) {
	s, _ := newTestServer(t)
	var logs lockedBuffer
	s.Log = slog.New(slog.NewTextHandler(&logs, nil))
	streams := echoSSHAgentHost(s)
	must(t, s.Setup(true))
	sock := filepath.Join(s.Root, agent.GuestSSHAgentSocket)

	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := range maxSSHAgentConns {
		conn, err := net.Dial("unix", sock)
		must(t, err)
		open = append(open, conn)
		if err := roundTrip(conn, fmt.Sprint("conn ", i)); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, maxSSHAgentConns, err)
		}
	}
	// Over the limit: closed at once, never reaching the host.
	for i := range 2 {
		conn, err := net.Dial("unix", sock)
		must(t, err)
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "x")
		n, err := conn.Read(make([]byte, 1))
		conn.Close()
		if n != 0 || err == nil || os.IsTimeout(err) {
			t.Fatalf("connection %d over the limit: read %d bytes, %v; want it closed at once", i+1, n, err)
		}
	}
	if n := streams.Load(); n != maxSSHAgentConns {
		t.Fatalf("the host saw %d streams, want %d", n, maxSSHAgentConns)
	}
	if n := strings.Count(logs.String(), "limit of open connections"); n != 1 {
		t.Fatalf("refusals logged %d times, want once:\n%s", n, logs.String())
	}

	// A connection that ends frees its slot.
	open[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("unix", sock)
		must(t, err)
		if roundTrip(conn, "freed") == nil {
			conn.Close()
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("no connection accepted after one of the open ones ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
