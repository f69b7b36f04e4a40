package forward

import (
	"errors"
	"fmt"
	"syscall"
)

// errStopped stands for a host listener whose socket failed under it:
// its accept (or read) loop ended while the port was still forwarded.
var errStopped = errors.New("the listener stopped serving")

// Repair is one host address of a forwarded port that Heal bound again.
type Repair struct {
	Proto     string
	GuestPort int
	Addr      string
	// Why it was not listening: the listener had stopped, or the address
	// was missing.
	Why string
}

func (r Repair) String() string {
	return fmt.Sprintf("%s %s (guest port %d) bound again: %s", r.Proto, r.Addr, r.GuestPort, r.Why)
}

// Heal binds again each host listener of a forwarded port that stopped
// serving (its socket failed or was closed under the forwarder) and each
// address that could not be bound because it was not there
// (EADDRNOTAVAIL: the network it belongs to was away). A port another
// program holds, or a privileged one, stays as it is: that needs the
// user. down lists the addresses still not listening for a reason Heal
// retries. Nothing is done, and nothing allocated, when nothing failed.
func (f *PortForwarder) Heal() (repaired []Repair, down []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, nil
	}
	for _, fw := range f.fwds {
		r, d := f.healForward(fw)
		repaired = append(repaired, r...)
		down = append(down, d...)
	}
	return repaired, down
}

// healForward is Heal for one port; called with f.mu held.
func (f *PortForwarder) healForward(fw *forward) (repaired []Repair, down []string) {
	changed := f.dropStopped(fw)
	for _, addr := range fw.addrs {
		err, ok := fw.failed[addr]
		if !ok || !healable(err) {
			continue
		}
		if !f.bind(fw, addr) {
			down = append(down, addr)
			continue
		}
		changed = true
		repaired = append(repaired, Repair{Proto: fw.key.proto, GuestPort: fw.key.port, Addr: addr, Why: err.Error()})
	}
	if !changed {
		return repaired, down
	}
	hadNone := fw.err != nil
	fw.noteFailures()
	for _, r := range repaired {
		f.opts.Log.Warn("forwarded port listening again", "proto", r.Proto, "guestPort", r.GuestPort, "host", r.Addr, "was", r.Why)
	}
	if hadNone && fw.err == nil {
		f.maybeDirect(fw)
	}
	return repaired, down
}

// dropStopped forgets fw's listeners whose serving loop ended, recording
// them as failed; called with f.mu held.
func (f *PortForwarder) dropStopped(fw *forward) bool {
	dropped := false
	kept := fw.listeners[:0]
	for _, l := range fw.listeners {
		select {
		case <-l.served:
			l.close()
			fw.failed[l.addr] = errStopped
			dropped = true
			f.opts.Log.Warn("forwarded port's host listener stopped serving", "proto", fw.key.proto, "guestPort", fw.key.port, "host", l.addr)
		default:
			kept = append(kept, l)
		}
	}
	fw.listeners = kept
	return dropped
}

// healable: the listener stopped, or its address was missing.
func healable(err error) bool {
	return errors.Is(err, errStopped) || errors.Is(err, syscall.EADDRNOTAVAIL)
}

// close ends the listener's socket (again, if it failed on its own).
func (l hostListener) close() {
	if l.ln != nil {
		l.ln.Close()
	}
	if l.udp != nil {
		l.udp.close()
	}
}
