package qemu

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncLog is a log buffer the machine writes from Stop's goroutine.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func logTo(m *Machine) *syncLog {
	l := &syncLog{}
	m.log = slog.New(slog.NewTextHandler(l, nil))
	return l
}

// endOn returns an onCommand that ends the fake VM (closes done, as
// supervise does) after the command cmd, after delay.
func endOn(cmd string, delay time.Duration, done *chan struct{}) func(string) {
	var once sync.Once
	return func(c string) {
		if c == cmd {
			once.Do(func() { time.AfterFunc(delay, func() { close(*done) }) })
		}
	}
}

// A guest that powers off on the ACPI button is waited for; quit is never
// sent, and Wait reports no error for the exit Stop asked for.
func TestStopGuestPowersOff(t *testing.T) {
	done := make(chan struct{})
	m, f := startFakeQMPWith(t, nil, endOn("system_powerdown", 50*time.Millisecond, &done))
	m.done = done
	m.waitErr = errors.New("signal: terminated")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Stop(ctx, false); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if got := f.commands(); !slices.Equal(got, []string{"system_powerdown"}) {
		t.Errorf("QMP commands = %q, want only the power button", got)
	}
	if err := m.Wait(); err != nil {
		t.Errorf("Wait after Stop = %v", err)
	}
}

// When the power button is refused, Stop quits QEMU; QEMU hanging up on
// quit is its answer, not a failure to report.
func TestStopPowerdownRefusedQuits(t *testing.T) {
	done := make(chan struct{})
	m, f := startFakeQMPWith(t, map[string][]string{
		"system_powerdown": {`{"error": {"class": "GenericError", "desc": "no ACPI"}}`},
		"quit":             {hangUp},
	}, endOn("quit", 300*time.Millisecond, &done))
	m.done = done
	log := logTo(m)
	t0 := time.Now()
	if err := m.Stop(context.Background(), false); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if d := time.Since(t0); d >= quitGrace {
		t.Errorf("Stop took %s: it waited out the quit grace", d)
	}
	if got := f.commands(); !slices.Equal(got, []string{"system_powerdown", "quit"}) {
		t.Errorf("QMP commands = %q", got)
	}
	if !strings.Contains(log.String(), "ACPI power-down failed") || !strings.Contains(log.String(), "no ACPI") {
		t.Errorf("log %q: want the refused power button", log)
	}
	if strings.Contains(log.String(), "QMP quit failed") {
		t.Errorf("log %q: the hang-up after quit taken for a failure", log)
	}
}

// A guest that does not power off before ctx ends is quit.
func TestStopGuestTooSlowQuits(t *testing.T) {
	done := make(chan struct{})
	m, f := startFakeQMPWith(t, nil, endOn("quit", 0, &done))
	m.done = done
	log := logTo(m)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := m.Stop(ctx, false); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if got := f.commands(); !slices.Equal(got, []string{"system_powerdown", "quit"}) {
		t.Errorf("QMP commands = %q", got)
	}
	if !strings.Contains(log.String(), "guest did not power off in time") {
		t.Errorf("log %q", log)
	}
}

func TestStopAnEndedVM(t *testing.T) {
	m, f := startFakeQMP(t, nil)
	close(m.done)
	if err := m.Stop(context.Background(), false); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if got := f.commands(); len(got) != 0 {
		t.Errorf("QMP commands to an ended VM: %q", got)
	}
}

func TestQueryStatus(t *testing.T) {
	m, f := startFakeQMP(t, map[string][]string{
		"query-status": {`{"return": {"status": "running", "running": true}}`, `{"error": {"class": "GenericError", "desc": "busy"}}`},
	})
	if st, err := m.QueryStatus(context.Background()); err != nil || st != "running" {
		t.Fatalf("QueryStatus = %q, %v", st, err)
	}
	if _, err := m.QueryStatus(context.Background()); err == nil || !strings.Contains(err.Error(), "QMP query-status: GenericError: busy") {
		t.Fatalf("QueryStatus on an error = %v", err)
	}
	close(m.done)
	f.commands()
	if _, err := m.QueryStatus(context.Background()); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("QueryStatus after the VM ended = %v", err)
	}
	if got := f.commands(); len(got) != 0 {
		t.Errorf("QMP commands to an ended VM: %q", got)
	}
}
