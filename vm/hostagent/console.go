package hostagent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// consoleWatch follows the guest's serial console log for the failures no
// hypervisor reports: a kernel panic line (the guest may reboot or stop
// before any device tells), and a boot that went silent. It works the same
// for every driver, since each writes Spec.SerialLog.
type consoleWatch struct {
	path    string
	silence time.Duration // no output this long before boot is done: a hang; 0 disables
	poll    time.Duration

	failed chan error // receives the first failure, once

	mu         sync.Mutex
	offset     int64
	partial    []byte
	lastOutput time.Time
	booted     bool
	panicErr   error
	reported   bool
}

// consolePanicMarker is what every Linux kernel prints when it panics.
const consolePanicMarker = "Kernel panic - not syncing"

// maxConsoleRead bounds one poll's read, so a guest flooding its console
// cannot make the host agent allocate without limit.
const maxConsoleRead = 256 << 10

// newConsoleWatch starts at the log's current end: earlier boots' lines
// (the log is appended to) are not this boot's.
func newConsoleWatch(path string, silence time.Duration) *consoleWatch {
	w := &consoleWatch{path: path, silence: silence, poll: 250 * time.Millisecond, failed: make(chan error, 1), lastOutput: time.Now()}
	if st, err := os.Stat(path); err == nil {
		w.offset = st.Size()
	}
	return w
}

// Failed delivers the first panic or hang.
func (w *consoleWatch) Failed() <-chan error { return w.failed }

// bootDone ends the silence check: a running guest may stay quiet for days.
func (w *consoleWatch) bootDone() {
	w.mu.Lock()
	w.booted = true
	w.mu.Unlock()
}

func (w *consoleWatch) isBooted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.booted
}

// panicked reads what is left in the log and reports a panic seen in it:
// after the VM exited, the panic line may have been the guest's last act.
func (w *consoleWatch) panicked() error {
	w.scan()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.panicErr
}

// run polls until stop is closed.
func (w *consoleWatch) run(stop <-chan struct{}) {
	t := time.NewTicker(w.poll)
	defer t.Stop()
	slowed := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if err := w.check(time.Now()); err != nil {
			w.report(err)
		}
		if !slowed && w.isBooted() {
			// Only a panic is left to catch, and the VM's exit rereads
			// the log anyway: fewer wake-ups for a laptop's battery.
			t.Reset(max(w.poll, time.Second))
			slowed = true
		}
	}
}

func (w *consoleWatch) report(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reported {
		return
	}
	w.reported = true
	w.failed <- err
}

// check scans new output and returns a failure, if any.
func (w *consoleWatch) check(now time.Time) error {
	w.scan()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.panicErr != nil {
		return w.panicErr
	}
	if w.silence > 0 && !w.booted && now.Sub(w.lastOutput) > w.silence {
		return fmt.Errorf("the guest hangs: no serial console output for %s during boot (see %s)", w.silence, w.path)
	}
	return nil
}

// scan reads the bytes appended since the last scan and looks for the
// panic marker line by line.
func (w *consoleWatch) scan() {
	w.mu.Lock()
	defer w.mu.Unlock()
	// A stat first: a running guest's console is silent nearly always, and
	// opening the file and a read buffer each poll made an idle host agent
	// allocate 1 MiB a second.
	st, err := os.Stat(w.path)
	if err != nil {
		return
	}
	if st.Size() < w.offset {
		w.offset, w.partial = 0, nil // rotated or truncated: a new file
	}
	if st.Size() == w.offset {
		return
	}
	f, err := os.Open(w.path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, min(st.Size()-w.offset, maxConsoleRead))
	n, err := f.ReadAt(buf, w.offset)
	if n == 0 && err != nil && !errors.Is(err, io.EOF) {
		return
	}
	if n == 0 {
		return
	}
	w.offset += int64(n)
	w.lastOutput = time.Now()
	data := append(w.partial, buf[:n]...)
	lines := bytes.Split(data, []byte("\n"))
	w.partial = append([]byte(nil), lines[len(lines)-1]...)
	if len(w.partial) > 4096 {
		w.partial = w.partial[len(w.partial)-4096:]
	}
	for _, l := range lines[:len(lines)-1] {
		if w.panicErr == nil && bytes.Contains(l, []byte(consolePanicMarker)) {
			line := strings.TrimSpace(string(l))
			if i := strings.Index(line, consolePanicMarker); i > 0 {
				line = line[i:] // drop the printk timestamp
			}
			w.panicErr = fmt.Errorf("the guest kernel panicked: %s", line)
		}
	}
}
