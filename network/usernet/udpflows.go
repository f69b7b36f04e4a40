package usernet

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// udpFlow is one relayed guest UDP flow: the guest's endpoint in the
// stack and its host socket.
type udpFlow struct {
	guest, host net.Conn
	last        atomic.Int64 // unix nanoseconds of the last datagram either way
	closeOnce   sync.Once
}

func (f *udpFlow) close() {
	f.closeOnce.Do(func() {
		f.guest.Close()
		f.host.Close()
	})
}

// udpFlows are the relayed flows, capped: a new flow past the cap ends the
// one idle the longest, which a request/response protocol has long
// finished with, rather than refusing the new one.
type udpFlows struct {
	mu    sync.Mutex
	flows map[*udpFlow]struct{}
}

// add registers f and returns the flow it evicted to stay within max, if
// any (closed already).
func (u *udpFlows) add(f *udpFlow, max int) (evicted *udpFlow) {
	u.mu.Lock()
	if u.flows == nil {
		u.flows = map[*udpFlow]struct{}{}
	}
	if len(u.flows) >= max {
		for g := range u.flows {
			if evicted == nil || g.last.Load() < evicted.last.Load() {
				evicted = g
			}
		}
		delete(u.flows, evicted)
	}
	u.flows[f] = struct{}{}
	u.mu.Unlock()
	if evicted != nil {
		evicted.close()
	}
	return evicted
}

func (u *udpFlows) remove(f *udpFlow) {
	u.mu.Lock()
	delete(u.flows, f)
	u.mu.Unlock()
}

func (u *udpFlows) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.flows)
}

// closeAll ends every flow, when the stack closes.
func (u *udpFlows) closeAll() {
	u.mu.Lock()
	flows := u.flows
	u.flows = nil
	u.mu.Unlock()
	for f := range flows {
		f.close()
	}
}

// relay copies datagrams both ways until neither side has sent one for
// idle, or the flow is evicted, then closes both: the flow's host socket
// lives only as long as the flow does.
func (f *udpFlow) relay(idle time.Duration) {
	f.last.Store(time.Now().UnixNano())
	pump := func(dst, src net.Conn) {
		buf := make([]byte, 65535)
		for {
			_ = src.SetReadDeadline(time.Now().Add(idle))
			n, err := src.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, f.last.Load())) < idle {
					continue // the other direction kept the flow alive
				}
				return
			}
			f.last.Store(time.Now().UnixNano())
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	done := make(chan struct{}, 2)
	go func() { pump(f.host, f.guest); done <- struct{}{} }()
	go func() { pump(f.guest, f.host); done <- struct{}{} }()
	<-done
	f.close()
	<-done
}
