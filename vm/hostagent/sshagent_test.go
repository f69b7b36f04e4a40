package hostagent

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// fakeSSHAgent listens on a real unix socket and answers one request per
// connection with answer, after checking it is the request want. It ends
// each connection when the client ends its side.
func fakeSSHAgent(t *testing.T, want, answer []byte) string {
	t.Helper()
	// Short: a unix socket path has room for about 100 bytes.
	dir := shortdir.New(t) // unix socket paths are short
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				got := make([]byte, len(want))
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
					return
				}
				c.Write(answer)
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return sock
}

// agentMessage frames an ssh-agent message: a 4-byte length, then body.
func agentMessage(body ...byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestSSHAgentStreamReachesTheHostAgent(t *testing.T) {
	request := agentMessage(11)            // SSH2_AGENTC_REQUEST_IDENTITIES
	answer := agentMessage(12, 0, 0, 0, 0) // SSH2_AGENT_IDENTITIES_ANSWER, no keys
	ha := &hostAgent{sshAgent: sshAgentForward{sock: fakeSSHAgent(t, request, answer)}}
	guest, host := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ha.serveGuestStream(agent.Request{Op: agent.OpSSHAgent}, host)
	}()
	guest.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := agent.ReadResponse(guest); err != nil {
		t.Fatalf("the host refused the stream: %v", err)
	}
	_, err := guest.Write(request)
	must(t, err)
	got := make([]byte, len(answer))
	if _, err := io.ReadFull(guest, got); err != nil || !bytes.Equal(got, answer) {
		t.Fatalf("read %x, %v; want the agent's answer %x", got, err, answer)
	}
	guest.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not end after the guest closed its side")
	}
}

func TestSSHAgentStreamRefusedWhenOffOrGone(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone.sock")
	for _, tt := range []struct{ sock, want string }{
		{"", "SSH agent forwarding is off"},
		{gone, "the host's SSH agent"},
	} {
		ha := &hostAgent{sshAgent: sshAgentForward{sock: tt.sock}}
		guest, host := net.Pipe()
		go ha.serveGuestStream(agent.Request{Op: agent.OpSSHAgent}, host)
		guest.SetDeadline(time.Now().Add(10 * time.Second))
		_, err := agent.ReadResponse(guest)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("sock %q: response %v, want an error with %q", tt.sock, err, tt.want)
		}
		guest.Close()
	}
}

func TestResolveSSHAgent(t *testing.T) {
	sock := fakeSSHAgent(t, nil, nil)
	file := filepath.Join(t.TempDir(), "plain")
	must(t, os.WriteFile(file, nil, 0o600))
	on, off := true, false
	for _, tt := range []struct {
		name      string
		sshAgent  *bool
		authSock  string
		wantSock  string
		wantOff   string
		wantAsked bool
	}{
		{"default with an agent", nil, sock, sock, "", true},
		{"default without SSH_AUTH_SOCK", nil, "", "", "SSH_AUTH_SOCK is not set", false},
		{"true without SSH_AUTH_SOCK", &on, "", "", "SSH_AUTH_SOCK is not set", true},
		{"false with an agent", &off, sock, "", "sshAgent is false", false},
		{"SSH_AUTH_SOCK missing", nil, sock + ".gone", "", "SSH_AUTH_SOCK " + sock + ".gone does not exist", true},
		{"SSH_AUTH_SOCK a file", nil, file, "", "SSH_AUTH_SOCK " + file + " is not a socket", true},
		{"SSH_AUTH_SOCK relative", &on, "agent.sock", "", `SSH_AUTH_SOCK "agent.sock" is not an absolute path`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := resolveSSHAgent(config.Config{SSHAgent: tt.sshAgent}, config.Host{SSHAuthSock: tt.authSock})
			if f.sock != tt.wantSock || f.off != tt.wantOff || f.asked != tt.wantAsked {
				t.Fatalf("got sock %q, off %q, asked %v; want %q, %q, %v", f.sock, f.off, f.asked, tt.wantSock, tt.wantOff, tt.wantAsked)
			}
		})
	}
}

// A start whose SSH_AUTH_SOCK points nowhere says so once and goes on;
// status and the guest's setup agree that forwarding is off.
func TestStartSSHAgentSaysWhyItIsOff(t *testing.T) {
	ha := &hostAgent{inst: &store.Instance{Name: "default"}, events: control.NewEventLog(), opts: Options{Host: config.Host{SSHAuthSock: "/nonexistent/agent.sock"}}}
	ha.startSSHAgent()
	want := "SSH agent forwarding is off: SSH_AUTH_SOCK /nonexistent/agent.sock does not exist\n"
	if got := notes(ha); got != want {
		t.Fatalf("notes %q, want %q", got, want)
	}
	if st := ha.sshAgent.status(); st.On || st.Off == "" {
		t.Fatalf("status %+v, want off with a reason", st)
	}
	if ha.guestSetup().SSHAgent {
		t.Fatal("the guest is asked for an agent socket the host cannot serve")
	}

	sock := fakeSSHAgent(t, nil, nil)
	ha = &hostAgent{inst: &store.Instance{Name: "default"}, events: control.NewEventLog(), opts: Options{Host: config.Host{SSHAuthSock: sock}}}
	ha.startSSHAgent()
	if n := notes(ha); n != "" {
		t.Fatalf("notes with a working agent: %q", n)
	}
	if st := ha.sshAgent.status(); !st.On || st.HostSocket != sock || st.GuestSocket != agent.GuestSSHAgentSocket {
		t.Fatalf("status %+v, want on from %s", st, sock)
	}
	if !ha.guestSetup().SSHAgent {
		t.Fatal("the guest is not asked for its agent socket")
	}
}

// The guest caps its SSH agent connections, but the host must not rely on
// a guest it does not control: past the cap a stream is refused at once,
// and a slot frees when a relay ends.
func TestSSHAgentStreamsCappedOnTheHost(t *testing.T) {
	request, answer := agentMessage(11), agentMessage(12, 0, 0, 0, 0)
	ha := &hostAgent{sshAgent: sshAgentForward{sock: fakeSSHAgent(t, request, answer)}}
	open := func() (net.Conn, error) {
		guest, host := net.Pipe()
		go ha.serveGuestStream(agent.Request{Op: agent.OpSSHAgent}, host)
		guest.SetDeadline(time.Now().Add(10 * time.Second))
		_, err := agent.ReadResponse(guest)
		return guest, err
	}
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for i := 0; i < maxSSHAgentStreams; i++ {
		c, err := open()
		if err != nil {
			t.Fatalf("stream %d refused: %v", i, err)
		}
		held = append(held, c)
	}
	c, err := open()
	c.Close()
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("stream past the cap of %d: %v, want refused at the limit", maxSSHAgentStreams, err)
	}
	held[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := open()
		if err == nil {
			held = append(held, c)
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("a slot was not freed after a relay ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
