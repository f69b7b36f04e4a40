package hostagent

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/config"
)

func (o *recordingOS) clockSets() int { return strings.Count(o.ran(), "setclock ") }

func lastClockSet(o *recordingOS) int64 {
	ran := o.ran()
	i := strings.LastIndex(ran, "setclock ")
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseInt(strings.Fields(ran[i+len("setclock "):])[0], 10, 64)
	return n
}

// The host's own clocks: the boot clock is never behind the monotonic one.
func TestLinuxClocks(t *testing.T) {
	boot, mono, err := linuxClocks()
	// Read one after the other: the monotonic one a moment later.
	if err != nil || boot+time.Millisecond < mono || mono <= 0 {
		t.Fatalf("CLOCK_BOOTTIME %s, CLOCK_MONOTONIC %s (%v)", boot, mono, err)
	}
}

// A wake of the host sets the guest's clock at once through the session;
// while the VM is paused for idleness the wake leaves it paused (no use of
// the VM) and the next use's wake sets the clock.
func TestWakeSetsTheGuestClock(t *testing.T) {
	m := &pausableMachine{agentMachine: newAgentMachine()}
	w := newGuestWorld(t)
	guestOS := &recordingOS{}
	m.start(w.agent(guestOS))
	ha := testHostAgent(t, m)
	clocks := &fakeClocks{boot: time.Hour, mono: time.Hour}
	ha.clocks = clocks.read
	ha.cfg.Idle = config.Duration(300 * time.Millisecond)
	ha.idle.monitor = ha.newIdleMonitor()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ha.redial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ha.adoptClient(c)
	ticks := make(chan time.Time)
	go watchWakes(ctx, ha.clocks, ticks, func(w wake) { ha.afterWake(ctx, w) })
	// look moves the clocks and has the watch look twice: the first
	// look's wake is handled before the second one is taken.
	look := func(move func()) {
		move()
		ticks <- time.Now()
		ticks <- time.Now()
	}
	// Awake, the looks find nothing.
	look(func() { clocks.pass(wakeLook) })
	if n := guestOS.clockSets(); n != 0 {
		t.Fatalf("%d clock sets without a wake", n)
	}
	look(func() { clocks.sleep(40 * time.Minute) })
	if n := guestOS.clockSets(); n != 1 {
		t.Fatalf("%d clock sets after a wake, want 1", n)
	}
	if set := lastClockSet(guestOS); set < time.Now().Unix()-2 || set > time.Now().Unix() {
		t.Errorf("the guest clock was set to %d, want the host's now %d", set, time.Now().Unix())
	}

	go ha.runIdle(ctx)
	waitFor(t, 10*time.Second, "idle pause", m.isPaused)
	before := guestOS.clockSets()
	look(func() { clocks.sleep(time.Hour) })
	if !m.isPaused() || guestOS.clockSets() != before {
		t.Fatalf("a wake while paused for idleness: paused %v, clock sets %d (were %d); want the VM left paused", m.isPaused(), guestOS.clockSets(), before)
	}
	conn, err := ha.openAgentStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if guestOS.clockSets() != before+1 {
		t.Errorf("the use after the wake did not set the clock (%d sets, were %d)", guestOS.clockSets(), before)
	}
	ha.idle.monitor.Close(ctx)
}
