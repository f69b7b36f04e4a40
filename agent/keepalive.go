package agent

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// Keepalive pings the peer of a yamux session and ends the session when
// an answer does not come, as yamux's own keepalive does, except that it
// can be suspended: a VM paused while idle answers nothing, and its
// session must outlive the pause with every stream in it. Both ends run
// one (YamuxConfig turns yamux's own off).
type Keepalive struct {
	sess  *yamux.Session
	log   *slog.Logger
	every time.Duration

	// mu is held across a ping, so Suspend returns only once no ping is
	// in flight: one sent just before the pause would otherwise time out
	// during it and end the session.
	mu        sync.Mutex
	suspended bool
}

// KeepaliveInterval is how often each end pings; a missed answer within
// yamux's ConnectionWriteTimeout (30 s) ends the session, so a dead peer
// is noticed within about 45 s.
const KeepaliveInterval = 15 * time.Second

// StartKeepalive pings sess's peer every interval until the session ends.
func StartKeepalive(sess *yamux.Session, every time.Duration, log *slog.Logger) *Keepalive {
	k := &Keepalive{sess: sess, log: log, every: every}
	go k.run()
	return k
}

func (k *Keepalive) run() {
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-k.sess.CloseChan():
			return
		case <-t.C:
		}
		if err := k.ping(); err != nil {
			if !errors.Is(err, yamux.ErrSessionShutdown) {
				k.log.Info("agent session keepalive failed; ending the session", "err", err)
				k.sess.Close()
			}
			return
		}
	}
}

func (k *Keepalive) ping() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.suspended {
		return nil
	}
	_, err := k.sess.Ping()
	return err
}

// Suspend stops the pings until Resume; it waits for a ping in flight.
func (k *Keepalive) Suspend() {
	k.mu.Lock()
	k.suspended = true
	k.mu.Unlock()
}

// Resume starts the pings again, the next one a full interval later.
func (k *Keepalive) Resume() {
	k.mu.Lock()
	k.suspended = false
	k.mu.Unlock()
}

// Suspended says whether Suspend is in effect.
func (k *Keepalive) Suspended() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.suspended
}
