package guest

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/vmdock/vmdock/agent"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// channelPair is a stand-in for a virtio-serial channel that stays
// connected on the host side whatever the guest does: the host end is a
// net.Conn, the guest end an *os.File, as the agent opens the port.
func channelPair(t *testing.T) (net.Conn, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	must(t, err)
	hostFile := os.NewFile(uintptr(fds[0]), "host")
	host, err := net.FileConn(hostFile)
	hostFile.Close()
	must(t, err)
	guest := os.NewFile(uintptr(fds[1]), "guest")
	t.Cleanup(func() { host.Close(); guest.Close() })
	return host, guest
}

// A guest agent that dies leaves the host's session waiting on a channel
// QEMU keeps open; the next agent's announcement must end that session at
// once, so the host redials.
func TestAnnounceEndsTheStaleHostSession(t *testing.T) {
	host, guest := channelPair(t)
	// The first agent's session runs on a duplicate of the port, so that
	// "killing" it (closing the duplicate) leaves the channel itself open.
	dup, err := unix.Dup(int(guest.Fd()))
	must(t, err)
	first := os.NewFile(uintptr(dup), "first-agent")
	go func() {
		if err := agent.GuestHello(first); err != nil {
			return
		}
		sess, err := yamux.Server(first, agent.YamuxConfig(slog.Default()))
		if err != nil {
			return
		}
		for {
			st, err := sess.AcceptStream()
			if err != nil {
				return
			}
			st.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := agent.Connect(ctx, host)
	must(t, err)
	defer c.Close()
	first.Close() // kill -9 of the first agent: the channel stays up

	select {
	case <-c.Done():
		t.Fatal("the host session ended before any announcement; the test proves nothing")
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	announce(guest, slog.Default())
	select {
	case <-c.Done():
		t.Logf("host session ended %s after the announcement", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("the host session outlived the new agent's announcement")
	}
}

// A host in the middle of its handshake skips the announcement.
func TestAnnounceIsSkippedByAHandshake(t *testing.T) {
	host, guest := channelPair(t)
	announce(guest, slog.Default())
	errc := make(chan error, 1)
	go func() { errc <- agent.GuestHello(guest) }()
	if err := agent.HostHello(host, "n1"); err != nil {
		t.Fatalf("HostHello after an announcement: %v", err)
	}
	must(t, <-errc)
}

// With no room to write (no host reading), announce gives up after its
// short EAGAIN retry instead of holding up the agent.
func TestAnnounceDoesNotBlock(t *testing.T) {
	_, guest := channelPair(t)
	junk := make([]byte, 1<<16)
	for {
		if _, err := unix.Write(int(guest.Fd()), junk); err != nil {
			break // the buffer is full
		}
	}
	done := make(chan struct{})
	go func() { announce(guest, slog.New(slog.NewTextHandler(io.Discard, nil))); close(done) }()
	select {
	case <-done:
	case <-time.After(announceRetryFor + 2*time.Second):
		t.Fatal("announce blocked on a full channel")
	}
}

// The previous agent died between a frame's header and the rest of its
// body. A bare RestartLine is swallowed as body bytes and the host's stale
// session waits for its keepalive; the announcement's newlines complete
// the frame and the next "header" ends the session at once.
func TestRestartAnnouncementEndsAStaleSessionMidFrame(t *testing.T) {
	for _, tc := range []struct {
		name      string
		announce  []byte
		wantEnded bool
	}{
		{"bare restart line", []byte(agent.RestartLine + "\n"), false},
		{"announcement", restartAnnouncement(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostEnd, guestEnd := net.Pipe()
			defer guestEnd.Close()
			sess, err := yamux.Server(hostEnd, agent.YamuxConfig(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			go func() {
				// Data frame, SYN, stream 1, 4096 bytes announced; 100 sent.
				hdr := []byte{0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0x10, 0}
				guestEnd.Write(hdr)
				guestEnd.Write(make([]byte, 100))
				// The new agent.
				guestEnd.Write(tc.announce)
			}()
			select {
			case <-sess.CloseChan():
				if !tc.wantEnded {
					t.Fatal("the stale session ended; the test no longer shows the problem")
				}
			case <-time.After(2 * time.Second):
				if tc.wantEnded {
					t.Fatal("the stale host session survived the new agent's announcement")
				}
			}
		})
	}
}

// Before udev's coldplug there is no /dev/virtio-ports link: the agent
// finds its port by name in sysfs and opens the kernel's node.
func TestOpenPortFindsItsPortInSysfsWithoutUdevLinks(t *testing.T) {
	root := shortdir.New(t)
	for port, name := range map[string]string{"vport1p1": "org.qemu.guest_agent.0", "vport1p2": agent.SerialName} {
		dir := filepath.Join(root, "sys", "class", "virtio-ports", port)
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "name"), []byte(name+"\n"), 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	for _, node := range []string{"vport1p1", "vport1p2"} {
		must(t, os.WriteFile(filepath.Join(root, "dev", node), []byte(node), 0o644))
	}
	s := &Server{Log: slog.New(slog.DiscardHandler), Root: root}

	f, err := s.openPort(agent.GuestConfig{}.Serial())
	if err != nil {
		t.Fatalf("openPort without the udev link: %v", err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "vport1p2" {
		t.Errorf("opened the node holding %q, want vport1p2 (the port named %s)", b, agent.SerialName)
	}

	if _, err := s.openPort("/dev/virtio-ports/org.vmdock.nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a port no sysfs entry names: %v, want not-exist (the agent retries)", err)
	}
	if _, err := s.openPort(filepath.Join(root, "elsewhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a configured path outside /dev/virtio-ports is not looked up: %v", err)
	}
}
