package syncmount

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mutagen-io/mutagen/pkg/synchronization/core"
)

// FlushAll syncs every mount; Terminate drops a mount's session and its
// history but leaves both copies as they are.
func TestFlushAllThenTerminate(t *testing.T) {
	e := newEnv(t)
	e.ensure(e.mount())
	writeFile(t, filepath.Join(e.host, "all.txt"), "flushed")
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := e.m.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	wantFile(t, filepath.Join(e.guest, "all.txt"), "flushed")

	if err := e.m.Terminate(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	if st, err := e.m.Status(); err != nil || len(st) != 0 {
		t.Errorf("status after Terminate: %+v, %v; want no sessions", st, err)
	}
	wantFile(t, filepath.Join(e.host, "all.txt"), "flushed")
	wantFile(t, filepath.Join(e.guest, "all.txt"), "flushed")
	for name, err := range map[string]error{"flush": e.m.Flush(ctx, "m1"), "terminate": e.m.Terminate(ctx, "m1")} {
		if !errors.Is(err, errUnknownMount) {
			t.Errorf("%s of a terminated mount: %v, want errUnknownMount", name, err)
		}
	}
	if err := e.m.FlushAll(ctx); err != nil {
		t.Errorf("FlushAll with no sessions: %v", err)
	}
}

func TestClosedManagerRefuses(t *testing.T) {
	e := newEnv(t)
	m := e.m
	e.close()
	ctx := context.Background()
	for name, err := range map[string]error{
		"pause all":  m.PauseAll(ctx),
		"resume all": m.ResumeAll(ctx),
		"reconnect":  m.Reconnect(ctx),
		"flush all":  m.FlushAll(ctx),
		"terminate":  m.Terminate(ctx, "m1"),
		"reset":      m.Reset(ctx, "m1"),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed manager: %v, want ErrClosed", name, err)
		}
	}
}

// recordHandler keeps the records logged through it.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// Mutagen's lines keep their level (errors and warnings), their scope and
// message; info and anything unparsed go to debug.
func TestMutagenLinesBecomeSlogRecords(t *testing.T) {
	h := &recordHandler{}
	w := &slogWriter{log: slog.New(h)}
	in := "2026-01-02 15:04:05.000000 [E] [sync] scan failed\n" +
		"2026-01-02 15:04:05.000001 [W] no scope here\n" +
		"2026-01-02 15:04:05.000002 [I] [remote] connected\n" +
		"a line of its own\n"
	if n, err := w.Write([]byte(in)); n != len(in) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	want := []struct {
		level      slog.Level
		msg, scope string
	}{
		{slog.LevelError, "scan failed", "sync"},
		{slog.LevelWarn, "no scope here", ""},
		{slog.LevelDebug, "connected", "remote"},
		{slog.LevelDebug, "a line of its own", ""},
	}
	if len(h.recs) != len(want) {
		t.Fatalf("%d records, want %d", len(h.recs), len(want))
	}
	for i, w := range want {
		r := h.recs[i]
		scope := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "scope" {
				scope = a.Value.String()
			}
			return true
		})
		if r.Level != w.level || r.Message != w.msg || scope != w.scope {
			t.Errorf("record %d: %v %q scope %q, want %v %q scope %q", i, r.Level, r.Message, scope, w.level, w.msg, w.scope)
		}
	}
}

func TestDescribeAConflictSide(t *testing.T) {
	entry := &core.Entry{}
	for _, tc := range []struct {
		changes []*core.Change
		want    string
	}{
		{nil, "unchanged"},
		{[]*core.Change{{New: entry}}, "created"},
		{[]*core.Change{{Old: entry}}, "deleted"},
		{[]*core.Change{{Old: entry, New: entry}}, "modified"},
	} {
		if got := describe(tc.changes); got != tc.want {
			t.Errorf("describe(%v) = %q, want %q", tc.changes, got, tc.want)
		}
	}
}
