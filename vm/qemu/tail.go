package qemu

import (
	"strings"
	"sync"
)

// tailBuffer keeps the last bytes a process wrote to stderr, so a start
// failure can quote QEMU's own complaint instead of "exit status 1".
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
	cut bool // the head was dropped, so the first line is partial
}

func newTail(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

// lines returns up to n last non-empty lines joined by "; ".
func (t *tailBuffer) lines(n int) string {
	t.mu.Lock()
	s := string(t.buf)
	if t.cut {
		_, s, _ = strings.Cut(s, "\n")
	}
	t.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "; ")
}
