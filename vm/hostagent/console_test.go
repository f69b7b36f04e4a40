package hostagent

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestConsoleWatchFindsPanicOfThisBootOnly(t *testing.T) {
	log := filepath.Join(t.TempDir(), "serial.log")
	appendTo(t, log, "[    1.0] Kernel panic - not syncing: from an earlier boot\n")
	w := newConsoleWatch(log, time.Minute)
	if err := w.check(time.Now()); err != nil {
		t.Fatalf("an earlier boot's panic counted: %v", err)
	}
	appendTo(t, log, "[    0.5] Linux version 6.12\n[    2.1] Kernel panic - not sync")
	if err := w.check(time.Now()); err != nil {
		t.Fatalf("half a line counted: %v", err)
	}
	appendTo(t, log, "ing: VFS: Unable to mount root fs on unknown-block(0,0)\n")
	err := w.check(time.Now())
	want := "the guest kernel panicked: Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
	if err == nil || err.Error() != want {
		t.Fatalf("check = %v, want %q", err, want)
	}
	if err := w.panicked(); err == nil || err.Error() != want {
		t.Errorf("panicked = %v", err)
	}
}

func TestConsoleWatchHangAndBootDone(t *testing.T) {
	log := filepath.Join(t.TempDir(), "serial.log")
	w := newConsoleWatch(log, 30*time.Second)
	appendTo(t, log, "booting\n")
	now := time.Now()
	if err := w.check(now.Add(20 * time.Second)); err != nil {
		t.Fatalf("20 s quiet counted as a hang: %v", err)
	}
	err := w.check(now.Add(31 * time.Second))
	if err == nil || !strings.Contains(err.Error(), "no serial console output for 30s during boot") {
		t.Fatalf("check after 31 s of silence = %v", err)
	}
	w.bootDone()
	if err := w.check(now.Add(time.Hour)); err != nil {
		t.Errorf("a quiet running guest counted as a hang: %v", err)
	}
}

func TestConsoleWatchReportsOnceAndSurvivesRotation(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "serial.log")
	appendTo(t, log, strings.Repeat("old line\n", 100))
	w := newConsoleWatch(log, 0)
	w.poll = 10 * time.Millisecond
	stop := make(chan struct{})
	defer close(stop)
	go w.run(stop)
	// Rotated: the new file is smaller than the old offset.
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	appendTo(t, log, "Kernel panic - not syncing: Attempted to kill init!\n")
	select {
	case err := <-w.Failed():
		if !strings.Contains(err.Error(), "Attempted to kill init") {
			t.Fatalf("failure = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("panic in a rotated log not reported")
	}
	appendTo(t, log, "Kernel panic - not syncing: again\n")
	select {
	case err := <-w.Failed():
		t.Fatalf("reported twice: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}

// A silent console costs a stat per poll, not a read buffer: the watch
// used to allocate 256 KiB every 250 ms for the life of the VM.
func TestConsoleWatchOfASilentLogAllocatesAlmostNothing(t *testing.T) {
	log := filepath.Join(t.TempDir(), "serial.log")
	appendTo(t, log, "[    0.5] Linux version 6.12\n")
	w := newConsoleWatch(log, 0)
	appendTo(t, log, "[    1.0] systemd started\n")
	w.scan()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		w.scan()
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Fatalf("100 polls of a silent console allocated %d bytes", got)
	}
	appendTo(t, log, "[    9.0] Kernel panic - not syncing: late\n")
	if err := w.panicked(); err == nil {
		t.Fatal("output after the silent polls was not read")
	}
}
