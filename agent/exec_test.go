package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedGuest plays a guest agent that reads the request of every
// stream the host opens and hands both to handle, which answers.
func scriptedGuest(t *testing.T, handle func(req Request, st net.Conn)) *Client {
	t.Helper()
	host, guest := net.Pipe()
	go func() {
		defer guest.Close()
		sess, err := guestSession(guest)
		if err != nil {
			return
		}
		defer sess.Close()
		for {
			st, err := sess.AcceptStream()
			if err != nil {
				return
			}
			go func() {
				defer st.Close()
				var req Request
				if err := ReadJSONLine(st, &req); err != nil {
					return
				}
				handle(req, st)
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func writeExit(st net.Conn, ex ExecExit) {
	b, _ := json.Marshal(ex)
	NewFrameWriter(st).WriteFrame(FrameExit, b)
}

// The process gets the host's stdin and terminal sizes; its stdout and
// stderr come back apart, and its exit code is Exec's answer.
func TestExecCopiesStdinSizesAndOutput(t *testing.T) {
	type seen struct {
		req        ExecRequest
		stdin      string
		rows, cols uint16
	}
	got := make(chan seen, 1)
	c := scriptedGuest(t, func(req Request, st net.Conn) {
		if req.Op != OpExec || req.Exec == nil {
			Reply(st, errors.New("not an exec"))
			return
		}
		Reply(st, nil)
		s := seen{req: *req.Exec}
		fw := NewFrameWriter(st)
		for eof, resized := false, false; !eof || !resized; {
			kind, p, err := ReadFrame(st)
			if err != nil {
				return
			}
			switch kind {
			case FrameStdin:
				s.stdin += string(p)
				fw.WriteFrame(FrameStdout, bytes.ToUpper(p))
			case FrameStdinEOF:
				eof = true
			case FrameResize:
				s.rows, s.cols, _ = ParseResize(p)
				resized = true
			}
		}
		fw.WriteFrame(FrameStderr, []byte("done\n"))
		got <- s
		writeExit(st, ExecExit{Code: 3})
	})
	resize := make(chan [2]uint16, 1)
	resize <- [2]uint16{24, 80}
	var stdout, stderr bytes.Buffer
	req := ExecRequest{Argv: []string{"tr", "a-z", "A-Z"}, Dir: "/srv", TTY: true}
	code, err := c.Exec(t.Context(), req, strings.NewReader("hello"), &stdout, &stderr, resize)
	if err != nil || code != 3 {
		t.Fatalf("Exec = %d, %v; want the process's 3", code, err)
	}
	if stdout.String() != "HELLO" || stderr.String() != "done\n" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	s := <-got
	if s.stdin != "hello" || s.rows != 24 || s.cols != 80 || s.req.Dir != "/srv" || !s.req.TTY || strings.Join(s.req.Argv, " ") != "tr a-z A-Z" {
		t.Errorf("the guest saw %+v", s)
	}
}

// Without stdin the process sees its end at once; without writers its
// output is dropped, not a failure.
func TestExecWithoutStdinOrWriters(t *testing.T) {
	c := scriptedGuest(t, func(_ Request, st net.Conn) {
		Reply(st, nil)
		if kind, _, err := ReadFrame(st); err != nil || kind != FrameStdinEOF {
			writeExit(st, ExecExit{Error: "first frame was not the end of stdin"})
			return
		}
		fw := NewFrameWriter(st)
		fw.WriteFrame(FrameStdout, []byte("out"))
		fw.WriteFrame(FrameStderr, []byte("err"))
		writeExit(st, ExecExit{Code: 0})
	})
	if code, err := c.Exec(t.Context(), ExecRequest{Argv: []string{"true"}}, nil, nil, nil, nil); err != nil || code != 0 {
		t.Errorf("Exec = %d, %v; want 0", code, err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestExecFailures(t *testing.T) {
	for _, tc := range []struct {
		name           string
		guest          func(st net.Conn)
		stdout, stderr io.Writer
		want           string
	}{
		{"refused", func(st net.Conn) { Reply(st, errors.New(`no such file "nope"`)) }, nil, nil, `exec nope: no such file "nope"`},
		{"not started", func(st net.Conn) { Reply(st, nil); writeExit(st, ExecExit{Error: "permission denied"}) }, nil, nil, "exec nope: permission denied"},
		{"bad exit frame", func(st net.Conn) { Reply(st, nil); NewFrameWriter(st).WriteFrame(FrameExit, []byte("{")) }, nil, nil, "exec nope: bad exit frame"},
		{"stream ends", func(st net.Conn) { Reply(st, nil); NewFrameWriter(st).WriteFrame(FrameStdout, []byte("partial")) }, nil, nil, "exec nope: stream ended before the exit code"},
		{"stdout fails", func(st net.Conn) {
			Reply(st, nil)
			NewFrameWriter(st).WriteFrame(FrameStdout, []byte("x"))
			writeExit(st, ExecExit{})
		}, failingWriter{}, nil, "exec nope: write stdout: disk full"},
		{"stderr fails", func(st net.Conn) {
			Reply(st, nil)
			NewFrameWriter(st).WriteFrame(FrameStderr, []byte("x"))
			writeExit(st, ExecExit{})
		}, nil, failingWriter{}, "exec nope: write stderr: disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := scriptedGuest(t, func(_ Request, st net.Conn) { tc.guest(st) })
			code, err := c.Exec(t.Context(), ExecRequest{Argv: []string{"nope"}}, nil, tc.stdout, tc.stderr, nil)
			if code != -1 || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Exec = %d, %v; want -1 and %q", code, err, tc.want)
			}
		})
	}
	c := scriptedGuest(t, func(Request, net.Conn) { t.Error("an empty command reached the guest") })
	if code, err := c.Exec(t.Context(), ExecRequest{}, nil, nil, nil, nil); code != -1 || err == nil || !strings.Contains(err.Error(), "empty command") {
		t.Errorf("empty command: %d, %v", code, err)
	}
}

// A cancelled exec closes the stream; the guest kills the process and
// still reports its exit, which the host reports as the cancel.
func TestExecCancelled(t *testing.T) {
	started := make(chan struct{})
	c := scriptedGuest(t, func(_ Request, st net.Conn) {
		Reply(st, nil)
		close(started)
		for {
			if _, _, err := ReadFrame(st); err != nil {
				break // the host closed its side
			}
		}
		writeExit(st, ExecExit{Code: 137})
	})
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		<-started
		cancel(errors.New("interrupted"))
	}()
	pr, pw := io.Pipe() // stdin that never ends
	defer pw.Close()
	code, err := c.Exec(ctx, ExecRequest{Argv: []string{"sleep", "1000"}}, pr, nil, nil, nil)
	if code != -1 || err == nil || !strings.Contains(err.Error(), "exec sleep: interrupted") {
		t.Errorf("Exec = %d, %v; want -1 and the cancel's cause", code, err)
	}
}

// Each request op carries its payload to the guest, and the guest's
// refusal comes back as the call's error.
func TestCallsSendTheirRequest(t *testing.T) {
	var mu sync.Mutex
	var got []Request
	c := scriptedGuest(t, func(req Request, st net.Conn) {
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		switch req.Op {
		case OpDocker, OpContainerd:
			Reply(st, errors.New("dockerd did not start"))
		case OpIdleCheck:
			WriteJSONLine(st, Response{OK: true, Idle: &IdleReport{}})
		default:
			Reply(st, nil)
		}
	})
	ctx := t.Context()
	at := time.Unix(1700000000, 5)
	for _, tc := range []struct {
		op   string
		call func() error
		ok   bool
		sent func(Request) bool
	}{
		{OpSetup, func() error { return c.Setup(ctx, Setup{Hostname: "vm"}) }, true, func(r Request) bool { return r.Setup != nil && r.Setup.Hostname == "vm" }},
		{OpMount, func() error { return c.Mount(ctx, MountRequest{Tag: "m0"}) }, true, func(r Request) bool { return r.Mount != nil && r.Mount.Tag == "m0" }},
		{OpTouch, func() error { return c.Touch(ctx, []string{"/a"}) }, true, func(r Request) bool { return len(r.Touch) == 1 && r.Touch[0] == "/a" }},
		{OpSetTime, func() error { return c.SetTime(ctx, at) }, true, func(r Request) bool { return r.Time == at.UnixNano() }},
		{OpQuiesce, func() error { return c.Quiesce(ctx) }, true, func(Request) bool { return true }},
		{OpPowerOff, func() error { return c.PowerOff(ctx) }, true, func(Request) bool { return true }},
		{OpFlushDisks, func() error { return c.FlushDisks(ctx) }, true, func(Request) bool { return true }},
		{OpDocker, func() error { return c.StartDocker(ctx) }, false, func(Request) bool { return true }},
		{OpContainerd, func() error { return c.StartContainerd(ctx) }, false, func(Request) bool { return true }},
		{OpIdleCheck, func() error { _, err := c.IdleCheck(ctx); return err }, true, func(Request) bool { return true }},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		err := tc.call()
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.op, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "dockerd did not start") {
			t.Errorf("%s: err %v does not carry the guest's reason", tc.op, err)
		}
		mu.Lock()
		if len(got) != 1 || got[0].Op != tc.op || !tc.sent(got[0]) {
			t.Errorf("%s: the guest got %+v", tc.op, got)
		}
		mu.Unlock()
	}
}

// A guest answering OK without the report asked for is an error, not an
// empty report.
func TestAnswersWithoutTheirPayload(t *testing.T) {
	c := scriptedGuest(t, func(_ Request, st net.Conn) { Reply(st, nil) })
	if _, err := c.IdleCheck(t.Context()); err == nil || !strings.Contains(err.Error(), "no report") {
		t.Errorf("IdleCheck = %v", err)
	}
	if _, err := c.Info(t.Context()); err == nil || !strings.Contains(err.Error(), "empty answer") {
		t.Errorf("Info = %v", err)
	}
}

// WatchSync hands over each changed mount's ID until the guest's stream
// ends (an error) or ctx does (ctx's error).
func TestWatchSync(t *testing.T) {
	c := scriptedGuest(t, func(req Request, st net.Conn) {
		if req.Op != OpSyncWatch || req.SyncWatch == nil {
			Reply(st, errors.New("not a sync watch"))
			return
		}
		Reply(st, nil)
		WriteJSONLine(st, SyncChange{ID: "m1"})
		WriteJSONLine(st, SyncChange{ID: "m2"})
		if len(req.SyncWatch.Mounts) == 2 {
			// as the guest agent does: the watch lasts until the host
			// closes the stream
			io.Copy(io.Discard, st)
		}
	})
	var ids []string
	err := c.WatchSync(t.Context(), SyncWatch{Mounts: []SyncWatchMount{{ID: "m1"}}}, func(id string) { ids = append(ids, id) })
	if err == nil || !strings.Contains(err.Error(), "sync watch") || strings.Join(ids, ",") != "m1,m2" {
		t.Errorf("WatchSync = %v after %v; want m1,m2 then the stream's end", err, ids)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ids = nil
	err = c.WatchSync(ctx, SyncWatch{Mounts: []SyncWatchMount{{ID: "m1"}, {ID: "m2"}}}, func(id string) {
		ids = append(ids, id)
		if id == "m2" {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || strings.Join(ids, ",") != "m1,m2" {
		t.Errorf("WatchSync = %v after %v; want context.Canceled after m1,m2", err, ids)
	}
	if _, err := c.OpenSync(t.Context()); err == nil || !strings.Contains(err.Error(), "not a sync watch") {
		t.Errorf("OpenSync refused: %v, want the guest's reason", err)
	}
}
