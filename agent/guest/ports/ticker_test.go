package ports

import (
	"testing"
	"time"
)

func TestPollTimes(t *testing.T) {
	p := Poll{}.withDefaults()
	now := time.Now()
	if p.Fast != 250*time.Millisecond || p.Busy != 10*time.Second || p.Idle != time.Second {
		t.Fatalf("defaults %+v", p)
	}
	if got := p.next(now, now.Add(time.Second)); got != p.Fast {
		t.Errorf("busy: %v", got)
	}
	if got := p.next(now, now.Add(-time.Second)); got != p.Idle {
		t.Errorf("idle: %v", got)
	}
	if q := (Poll{Fast: 2 * time.Second, Idle: time.Second}).withDefaults(); q.Idle != 2*time.Second {
		t.Errorf("idle shorter than fast: %+v", q)
	}
}

// The ticker looks on the fast period while the host is busy and on the
// idle one after; a stream from the host brings the next look forward to
// the fast period but never puts off one already due sooner; the edge into
// quiet is told once per quiet spell, a change alone does not start a new
// one.
func TestTickerWhenToLookAgain(t *testing.T) {
	tk := newTicker(Poll{Fast: time.Second, Busy: 10 * time.Second, Idle: time.Hour})
	defer tk.stop()
	now := time.Now()
	if tk.looked(now) || tk.due != now.Add(time.Second) {
		t.Fatalf("busy host: went quiet or next look at %v, want in 1s", tk.due.Sub(now))
	}
	tk.hostBusy(now.Add(500 * time.Millisecond))
	if tk.due != now.Add(time.Second) {
		t.Errorf("a stream put off a look due sooner: in %v", tk.due.Sub(now))
	}

	later := now.Add(11 * time.Second)
	if !tk.looked(later) || tk.due != later.Add(time.Hour) {
		t.Fatalf("quiet host: no quiet edge or next look in %v, want 1h", tk.due.Sub(later))
	}
	if tk.looked(later.Add(time.Hour)) {
		t.Error("the quiet edge told twice in one quiet spell")
	}
	tk.changed(later.Add(time.Hour))
	if tk.looked(later.Add(2*time.Hour)) || tk.quiet != true {
		t.Error("a change alone started a new quiet spell")
	}

	busy := later.Add(2*time.Hour + 30*time.Minute)
	tk.hostBusy(busy)
	if tk.due != busy.Add(time.Second) {
		t.Errorf("a stream left an idle watch waiting %v, want 1s", tk.due.Sub(busy))
	}
	if !tk.looked(busy.Add(11 * time.Second)) {
		t.Error("no quiet edge after the host was busy again")
	}
}
