package control

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/driver"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// shortSocket keeps the path under the 104-byte sun_path limit of macOS.
func shortSocket(t *testing.T) string {
	t.Helper()
	dir := shortdir.New(t) // unix socket paths are short
	return filepath.Join(dir, "ha.sock")
}

type fakeAgent struct {
	events *EventLog
	stops  chan bool
	stream func(context.Context) (net.Conn, error)
}

func serve(t *testing.T, a *fakeAgent) *Client {
	t.Helper()
	sock := shortSocket(t)
	a.events = NewEventLog()
	a.stops = make(chan bool, 1)
	srv, err := Listen(sock, Handlers{
		Status: func() Status {
			return Status{PID: 42, Phase: PhaseRunning, Step: a.events.CurrentStep(), Machine: driver.MachineInfo{Driver: driver.TypeQEMU, Accel: "tcg"},
				Boot: &BootReport{Steps: []StepTime{{"vm", 1.5}, {"agent", 20}}, GuestUptime: 9.5}}
		},
		Events:     a.events,
		Stop:       func(req StopRequest) { a.stops <- req.Force },
		OpenStream: a.stream,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return NewClient(sock)
}

func TestStatusRoundTrip(t *testing.T) {
	a := &fakeAgent{}
	c := serve(t, a)
	a.events.Emit("vm", EventBegin, "", "")
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != 42 || st.Step != "vm" || st.Machine.Accel != "tcg" || st.Boot == nil || len(st.Boot.Steps) != 2 || st.Boot.Steps[1].Seconds != 20 || st.Boot.GuestUptime != 9.5 {
		t.Fatalf("status = %+v (boot %+v)", st, st.Boot)
	}
}

func TestStatusOfNobody(t *testing.T) {
	_, err := NewClient(filepath.Join(t.TempDir(), "none.sock")).Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), "query host agent") {
		t.Fatalf("err = %v", err)
	}
}

// A follower that connects late sees every past event, then live ones,
// and a done event carries its duration as a number.
func TestEventsPastThenLive(t *testing.T) {
	a := &fakeAgent{}
	c := serve(t, a)
	a.events.Emit("vm", EventBegin, "", "")
	a.events.Done("vm", 1500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next := func() Event {
		ev, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	if ev := next(); ev.Step != "vm" || ev.State != EventBegin {
		t.Fatalf("first = %+v", ev)
	}
	if ev := next(); ev.State != EventDone || ev.Seconds != 1.5 || ev.Detail != "1.5s" {
		t.Fatalf("second = %+v", ev)
	}
	if st := a.events.StepTimes(); len(st) != 1 || st[0] != (StepTime{"vm", 1.5}) {
		t.Fatalf("step times %+v, want the one done step", st)
	}
	a.events.Emit("ready", EventReady, "", "")
	if ev := next(); ev.State != EventReady {
		t.Fatalf("live = %+v", ev)
	}
}

func TestStopCarriesForce(t *testing.T) {
	a := &fakeAgent{}
	c := serve(t, a)
	for _, force := range []bool{false, true} {
		if err := c.Stop(context.Background(), StopRequest{Force: force}); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-a.stops:
			if got != force {
				t.Fatalf("stop force = %v, want %v", got, force)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("stop never reached the handler")
		}
	}
}

// The exec upgrade hands the raw connection to the guest stream: bytes go
// both ways unchanged, including bytes sent right behind the request.
func TestOpenStreamPipesToGuest(t *testing.T) {
	a := &fakeAgent{stream: func(context.Context) (net.Conn, error) {
		guest, host := net.Pipe()
		go func() { // an echo "guest agent"
			defer guest.Close()
			io.Copy(guest, guest)
		}()
		return host, nil
	}}
	c := serve(t, a)
	conn, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("hello guest")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("hello guest"))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "hello guest" {
		t.Fatalf("echo = %q, %v", buf, err)
	}
}

func TestOpenStreamRefusedWithoutGuest(t *testing.T) {
	for name, stream := range map[string]func(context.Context) (net.Conn, error){
		"not connected": nil,
		"dial fails":    func(context.Context) (net.Conn, error) { return nil, errors.New("agent gone") },
	} {
		t.Run(name, func(t *testing.T) {
			c := serve(t, &fakeAgent{stream: stream})
			_, err := c.OpenStream(context.Background())
			if err == nil || !strings.Contains(err.Error(), "503") {
				t.Fatalf("err = %v, want a 503 refusal", err)
			}
		})
	}
}

func TestListenRefusesAFileInTheWay(t *testing.T) {
	sock := shortSocket(t)
	if err := os.WriteFile(sock, []byte("user data"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(sock, Handlers{Status: func() Status { return Status{} }, Events: NewEventLog(), Stop: func(StopRequest) {}})
	if err == nil {
		t.Fatal("Listen replaced a regular file")
	}
	if b, _ := os.ReadFile(sock); string(b) != "user data" {
		t.Fatalf("file changed: %q", b)
	}
}

// Sync actions carry the host path (spaces and all) to the host agent and
// bring its refusal back as the error text; an instance without sync
// mounts says so.
func TestSyncActions(t *testing.T) {
	sock := shortSocket(t)
	var got []string
	srv, err := Listen(sock, Handlers{
		Status: func() Status { return Status{} }, Events: NewEventLog(), Stop: func(StopRequest) {},
		SyncFlush: func(_ context.Context, p string) error { got = append(got, "flush "+p); return nil },
		SyncReset: func(_ context.Context, p string) error { return errors.New("/x is not in a sync mount") },
		SyncPause: func(_ context.Context, p string) error { got = append(got, "pause"); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := NewClient(sock)
	ctx := context.Background()
	if err := c.SyncFlush(ctx, "/home/u/my app"); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncPause(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "flush /home/u/my app|pause" {
		t.Fatalf("handlers saw %q", got)
	}
	if err := c.SyncReset(ctx, "/x"); err == nil || err.Error() != "/x is not in a sync mount" {
		t.Fatalf("reset: %v", err)
	}
	if err := c.SyncResume(ctx); err == nil || !strings.Contains(err.Error(), "no sync mounts") {
		t.Fatalf("resume without a handler: %v", err)
	}
}

// The heap profile route serves pprof's gzipped protobuf, and its text
// form with the runtime's memory statistics.
func TestHeapProfile(t *testing.T) {
	c := serve(t, &fakeAgent{})
	ctx := context.Background()
	for _, q := range []struct{ query, want string }{{"", "\x1f\x8b"}, {"?debug=1", "# runtime.MemStats"}} {
		resp, err := c.do(ctx, http.MethodGet, HeapProfilePath+q.query)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d, %v", q.query, resp.StatusCode, err)
		}
		if !strings.Contains(string(body), q.want) || (q.query == "" && !strings.HasPrefix(string(body), q.want)) {
			t.Errorf("heap profile%s: %d bytes without %q", q.query, len(body), q.want)
		}
	}
}

// SetIdle carries the period (0 too); the host agent's refusal comes back
// as its text, and a host agent without the idle pause answers 404.
func TestSetIdle(t *testing.T) {
	sock := shortSocket(t)
	var got []time.Duration
	srv, err := Listen(sock, Handlers{
		Status: func() Status { return Status{} }, Events: NewEventLog(), Stop: func(StopRequest) {},
		SetIdle: func(d time.Duration) error {
			if d > 0 && d < 10*time.Second {
				return errors.New("idle: 5s is not accepted; accepted: 0 (never pause) or 10s and up")
			}
			got = append(got, d)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := NewClient(sock)
	ctx := context.Background()
	for _, d := range []time.Duration{30 * time.Second, 0} {
		if err := c.SetIdle(ctx, d); err != nil {
			t.Fatalf("SetIdle(%s): %v", d, err)
		}
	}
	if len(got) != 2 || got[0] != 30*time.Second || got[1] != 0 {
		t.Fatalf("handler saw %v", got)
	}
	if err := c.SetIdle(ctx, 5*time.Second); err == nil || !strings.Contains(err.Error(), "idle: 5s is not accepted") {
		t.Fatalf("refused period: %v", err)
	}
	resp, err := c.do(ctx, http.MethodPost, IdlePath+"?after=soon")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("after=soon: status %d, want 400", resp.StatusCode)
	}
	if err := serve(t, &fakeAgent{}).SetIdle(ctx, time.Minute); err == nil || !strings.Contains(err.Error(), "no idle pause") {
		t.Errorf("without a handler: %v", err)
	}
}

// The CPU profile route profiles for the seconds asked and serves pprof's
// gzipped protobuf; a bad duration is refused naming what is accepted.
func TestCPUProfile(t *testing.T) {
	c := serve(t, &fakeAgent{})
	ctx := context.Background()
	start := time.Now()
	resp, err := c.do(ctx, http.MethodGet, CPUProfilePath+"?seconds=1")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "\x1f\x8b") {
		t.Fatalf("status %d, %d bytes, %v; want a gzipped profile", resp.StatusCode, len(body), err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("a 1 s profile came back after %v", took)
	}
	for _, q := range []string{"0", "61", "ten"} {
		resp, err := c.do(ctx, http.MethodGet, CPUProfilePath+"?seconds="+q)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "accepted: a whole number from 1 to 60") {
			t.Errorf("seconds=%s: status %d %q", q, resp.StatusCode, body)
		}
	}
}
