package forward

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// udpRelay serves one host UDP port. Each host peer address gets its own
// guest stream (a session), so replies find their way back to the right
// peer; sessions idle for UDPIdleTimeout are closed.
type udpRelay struct {
	f    *PortForwarder
	fw   *forward
	addr string // host address pc listens on
	pc   net.PacketConn
	done chan struct{}
	// served is closed when readLoop ends.
	served chan struct{}
	once   sync.Once

	mu       sync.Mutex
	sessions map[string]*udpSession
}

type udpSession struct {
	peer net.Addr
	in   chan []byte
	last atomic.Int64 // unix nanoseconds of the last datagram either way
	done chan struct{}

	mu     sync.Mutex
	closed bool
	stream datagrams
}

// datagrams is a session's way to the guest: a PacketStream through the
// guest agent, or a connected datagram conn on the direct path.
type datagrams interface {
	ReadPacket(buf []byte) (int, error)
	WritePacket(p []byte) error
	Close() error
}

// datagramConn is a connected datagram conn as datagrams.
type datagramConn struct{ net.Conn }

func (c datagramConn) ReadPacket(buf []byte) (int, error) { return c.Read(buf) }

func (c datagramConn) WritePacket(p []byte) error {
	_, err := c.Write(p)
	return err
}

// udpQueue bounds datagrams waiting for a session's guest stream; beyond
// it datagrams are dropped, as a congested UDP path would.
const udpQueue = 128

func newUDPRelay(f *PortForwarder, fw *forward, pc net.PacketConn, addr string, served chan struct{}) *udpRelay {
	r := &udpRelay{f: f, fw: fw, addr: addr, pc: pc, done: make(chan struct{}), served: served, sessions: map[string]*udpSession{}}
	f.wg.Add(2)
	go r.readLoop()
	go r.reapLoop()
	return r
}

func (r *udpRelay) readLoop() {
	defer r.f.wg.Done()
	defer close(r.served)
	buf := make([]byte, MaxPacket)
	for {
		n, peer, err := r.pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.f.opts.Log.Warn("udp forwarder stopped reading", "host", r.addr, "err", err)
			}
			return
		}
		s := r.session(peer)
		if s == nil {
			return
		}
		s.touch()
		select {
		case s.in <- append([]byte(nil), buf[:n]...):
		default:
			r.f.opts.Log.Debug("udp datagram dropped: guest stream is behind", "peer", peer)
		}
	}
}

// session returns the peer's session, starting one if needed; nil once
// the relay is closed.
func (r *udpRelay) session(peer net.Addr) *udpSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		return nil
	default:
	}
	k := peer.String()
	if s := r.sessions[k]; s != nil {
		return s
	}
	s := &udpSession{peer: peer, in: make(chan []byte, udpQueue), done: make(chan struct{})}
	s.touch()
	r.sessions[k] = s
	r.f.wg.Add(1)
	go r.run(s)
	return s
}

func (r *udpRelay) run(s *udpSession) {
	defer r.f.wg.Done()
	defer r.drop(s)
	addr := r.f.guestAddr(r.fw)
	ctx, cancel := context.WithTimeout(r.f.ctx, 30*time.Second)
	release, err := r.f.opts.Hold.take(ctx)
	if err != nil {
		cancel()
		r.f.opts.Log.Warn("udp peer refused: the VM could not be woken", "peer", s.peer, "err", err)
		return
	}
	defer release()
	ps, err := r.dialGuest(ctx, addr)
	cancel()
	if err != nil {
		r.f.opts.Log.Warn("dial guest udp port", "guest", addr, "err", err)
		return
	}
	if !s.setStream(ps) {
		ps.Close()
		return
	}
	r.f.wg.Add(1)
	go r.replies(s, ps)
	for {
		select {
		case <-s.done:
			return
		case p := <-s.in:
			if err := ps.WritePacket(p); err != nil {
				r.f.opts.Log.Debug("udp session ended", "peer", s.peer, "err", err)
				return
			}
		}
	}
}

// dialGuest opens a session's way to the guest port: the direct path
// when the port has one, else (or when it fails) a stream through the
// guest agent to addr.
func (r *udpRelay) dialGuest(ctx context.Context, addr string) (datagrams, error) {
	r.f.mu.Lock()
	direct := r.fw.direct
	r.f.mu.Unlock()
	if direct != "" && r.f.directUDP != nil {
		c, err := r.f.directUDP(ctx, direct)
		if err == nil {
			return datagramConn{c}, nil
		}
		r.f.opts.Log.Warn("direct path to the guest udp port failed; tunnelling", "guest", addr, "direct", direct, "err", err)
	}
	conn, err := r.f.opts.Dial(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	return NewPacketStream(conn), nil
}

// replies copies the guest's datagrams back to the host peer.
func (r *udpRelay) replies(s *udpSession, ps datagrams) {
	defer r.f.wg.Done()
	defer r.drop(s)
	buf := make([]byte, MaxPacket)
	for {
		n, err := ps.ReadPacket(buf)
		if err != nil {
			return
		}
		s.touch()
		if _, err := r.pc.WriteTo(buf[:n], s.peer); err != nil {
			return
		}
	}
}

// drop closes a session and forgets it, so the peer's next datagram opens
// a fresh guest stream.
func (r *udpRelay) drop(s *udpSession) {
	r.mu.Lock()
	if r.sessions[s.peer.String()] == s {
		delete(r.sessions, s.peer.String())
	}
	r.mu.Unlock()
	s.close()
}

func (r *udpRelay) reapLoop() {
	defer r.f.wg.Done()
	idle := r.f.opts.UDPIdleTimeout
	t := time.NewTicker(max(idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case now := <-t.C:
			var stale []*udpSession
			r.mu.Lock()
			for _, s := range r.sessions {
				if now.Sub(time.Unix(0, s.last.Load())) >= idle {
					stale = append(stale, s)
				}
			}
			r.mu.Unlock()
			for _, s := range stale {
				r.drop(s)
			}
		}
	}
}

func (r *udpRelay) sessionCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sessions)
}

func (r *udpRelay) close() {
	r.once.Do(func() {
		r.mu.Lock()
		close(r.done)
		sessions := r.sessions
		r.sessions = map[string]*udpSession{}
		r.mu.Unlock()
		r.pc.Close()
		for _, s := range sessions {
			s.close()
		}
	})
}

func (s *udpSession) touch() { s.last.Store(time.Now().UnixNano()) }

func (s *udpSession) setStream(ps datagrams) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.stream = ps
	return true
}

func (s *udpSession) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	close(s.done)
	if s.stream != nil {
		s.stream.Close()
	}
}
