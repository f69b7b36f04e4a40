package ports

import "time"

// Poll is when the watch looks again: every Fast (default 250ms) while the
// host is busy with the guest, that is for Busy (default 10s) after the
// host opened a stream (a docker API call, an exec, a forwarded
// connection) or a look found a change, and every Idle (default 1s, never
// shorter than Fast) otherwise. A `docker run -p` is an API call, so its
// port shows up within Fast; an idle guest wakes the agent once a second
// instead of four times, which under TCG is most of the agent's idle CPU.
type Poll struct{ Fast, Busy, Idle time.Duration }

func (p Poll) withDefaults() Poll {
	if p.Fast <= 0 {
		p.Fast = 250 * time.Millisecond
	}
	if p.Busy <= 0 {
		p.Busy = 10 * time.Second
	}
	if p.Idle <= 0 {
		p.Idle = time.Second
	}
	p.Idle = max(p.Idle, p.Fast)
	return p
}

// next is the wait before the following look.
func (p Poll) next(now, busyUntil time.Time) time.Duration {
	if now.Before(busyUntil) {
		return p.Fast
	}
	return p.Idle
}

// ticker says when the watch looks again, by Poll, and when the host went
// quiet: the edge from busy to idle, once per quiet spell.
type ticker struct {
	poll      Poll
	timer     *time.Timer
	busyUntil time.Time
	due       time.Time // of the next look
	quiet     bool      // the host went quiet and looked() said so
}

// newTicker returns a ticker that fires at once, the host counted busy.
func newTicker(p Poll) *ticker {
	p = p.withDefaults()
	now := time.Now()
	return &ticker{poll: p, timer: time.NewTimer(0), busyUntil: now.Add(p.Busy), due: now}
}

// C fires when the watch should look.
func (t *ticker) C() <-chan time.Time { return t.timer.C }

func (t *ticker) stop() { t.timer.Stop() }

// hostBusy notes a stream the host opened: look soon when the watch was
// idling, without postponing a look already due, since streams may arrive
// faster than Fast.
func (t *ticker) hostBusy(now time.Time) {
	t.busyUntil = now.Add(t.poll.Busy)
	t.quiet = false
	if t.due.Sub(now) > t.poll.Fast {
		t.due = now.Add(t.poll.Fast)
		t.timer.Reset(t.poll.Fast)
	}
}

// changed notes a look that found a change: the host stays busy for Busy
// more.
func (t *ticker) changed(now time.Time) { t.busyUntil = now.Add(t.poll.Busy) }

// looked schedules the look after one that ended at now and reports
// whether the host has just gone quiet.
func (t *ticker) looked(now time.Time) (wentQuiet bool) {
	if !t.quiet && !now.Before(t.busyUntil) {
		t.quiet = true
		wentQuiet = true
	}
	wait := t.poll.next(now, t.busyUntil)
	t.due = now.Add(wait)
	t.timer.Reset(wait)
	return wentQuiet
}
