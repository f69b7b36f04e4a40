package agent

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// freezable is a conn whose reads stop while frozen, as a paused VM's
// end of the channel does.
type freezable struct {
	net.Conn
	mu     sync.Mutex
	frozen bool
	thawed chan struct{}
}

func (f *freezable) freeze() {
	f.mu.Lock()
	f.frozen, f.thawed = true, make(chan struct{})
	f.mu.Unlock()
}

func (f *freezable) thaw() {
	f.mu.Lock()
	if f.frozen {
		f.frozen = false
		close(f.thawed)
	}
	f.mu.Unlock()
}

func (f *freezable) Read(b []byte) (int, error) {
	f.mu.Lock()
	frozen, thawed := f.frozen, f.thawed
	f.mu.Unlock()
	if frozen {
		<-thawed
	}
	return f.Conn.Read(b)
}

// pausedPair is a host session and a guest session whose reads the test
// freezes; only the host pings, every 10 ms, and gives an answer 100 ms.
func pausedPair(t *testing.T) (host *yamux.Session, guest *freezable, k *Keepalive) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, b := net.Pipe()
	guest = &freezable{Conn: b}
	cfg := YamuxConfig(log)
	cfg.ConnectionWriteTimeout = 100 * time.Millisecond
	gs, err := yamux.Server(guest, cfg)
	if err != nil {
		t.Fatal(err)
	}
	host, err = yamux.Client(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { guest.thaw(); host.Close(); gs.Close() })
	return host, guest, StartKeepalive(host, 10*time.Millisecond, log)
}

func closedWithin(s *yamux.Session, d time.Duration) bool {
	select {
	case <-s.CloseChan():
		return true
	case <-time.After(d):
		return false
	}
}

// A suspended keepalive lets a session outlive a peer that answers
// nothing for many ping timeouts; running again, the pings resume.
func TestKeepaliveSuspendedSurvivesAPause(t *testing.T) {
	host, guest, k := pausedPair(t)
	k.Suspend()
	guest.freeze()
	if closedWithin(host, 600*time.Millisecond) {
		t.Fatal("the session ended while its keepalive was suspended")
	}
	guest.thaw()
	k.Resume()
	if closedWithin(host, 300*time.Millisecond) {
		t.Fatal("the session ended after the pause")
	}
	if _, err := host.Ping(); err != nil {
		t.Fatalf("ping after the pause: %v", err)
	}
}

// Unsuspended, a peer that answers nothing ends the session.
func TestKeepaliveEndsASessionWhosePeerIsGone(t *testing.T) {
	host, guest, _ := pausedPair(t)
	guest.freeze()
	if !closedWithin(host, 2*time.Second) {
		t.Fatal("the session outlived a peer that answered no ping")
	}
}
