package instance

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/store"
	"github.com/vmdock/vmdock/vm/store/storetest"

	"github.com/vmdock/vmdock/internal/shortdir"
)

// serveHostAgent plays a live host agent in phase/step on inst's control
// socket.
func serveHostAgent(t *testing.T, inst *store.Instance, phase, step string) {
	t.Helper()
	ln, err := net.Listen("unix", inst.ControlSocketPath())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(control.Status{PID: os.Getpid(), Phase: phase, Step: step})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	if err := os.WriteFile(inst.PIDPath(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func shortInstance(t *testing.T) *store.Instance {
	t.Helper()
	dir := shortdir.New(t) // unix socket paths are short
	return &store.Instance{Name: "x", Dir: dir}
}

func TestStatusShowsPhase(t *testing.T) {
	for _, tt := range []struct{ phase, step, state, text string }{
		{"starting", "image", StateStarting, "Starting: image"},
		{"stopping", "", StateStopping, "Stopping"},
		{"running", "", StateRunning, "Running"},
	} {
		inst := shortInstance(t)
		serveHostAgent(t, inst, tt.phase, tt.step)
		st := Status(context.Background(), inst)
		if st.State != tt.state || st.String() != tt.text {
			t.Errorf("phase %s: status %s (%q), want %s (%q)", tt.phase, st.State, st.String(), tt.state, tt.text)
		}
	}
}

func TestLockWhileStartingSaysSo(t *testing.T) {
	inst := shortInstance(t)
	serveHostAgent(t, inst, "starting", "image")
	pid, release := storetest.LockInOtherProcess(t, inst.Dir)
	defer release()
	_, err := Lock(context.Background(), inst)
	want := []string{"still starting", "step image", "pid " + strconv.Itoa(pid), "vmdock status -p x"}
	for _, w := range want {
		if err == nil || !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), w) {
			t.Fatalf("Lock during a boot: %v; want ErrLocked saying %q", err, w)
		}
	}
}

func TestStatus(t *testing.T) {
	// Unix socket paths are short-limited; t.TempDir under /tmp is fine.
	newInst := func(t *testing.T) *store.Instance {
		dir := shortdir.New(t) // unix socket paths are short
		return &store.Instance{Name: "x", Dir: dir}
	}
	serve := func(t *testing.T, inst *store.Instance, h http.Handler) {
		ln, err := net.Listen("unix", inst.ControlSocketPath())
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	writePID := func(t *testing.T, inst *store.Instance, pid int) {
		if err := os.WriteFile(inst.PIDPath(), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dead := deadPID(t)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != control.StatusPath {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(control.Status{PID: os.Getpid(), Phase: control.PhaseRunning})
	})
	tests := []struct {
		name   string
		setup  func(*testing.T, *store.Instance)
		state  string
		reason string
	}{
		{name: "nothing", setup: func(*testing.T, *store.Instance) {}, state: StateStopped},
		{name: "running", setup: func(t *testing.T, i *store.Instance) { writePID(t, i, os.Getpid()); serve(t, i, ok) }, state: StateRunning},
		{name: "stale pid", setup: func(t *testing.T, i *store.Instance) { writePID(t, i, dead) }, state: StateBroken, reason: "is not running"},
		{name: "garbage pid", setup: func(t *testing.T, i *store.Instance) { os.WriteFile(i.PIDPath(), []byte("x"), 0o600) }, state: StateBroken, reason: "unreadable pid file"},
		{name: "alive no socket", setup: func(t *testing.T, i *store.Instance) { writePID(t, i, os.Getpid()) }, state: StateBroken, reason: "no control socket"},
		{name: "stale socket", setup: func(t *testing.T, i *store.Instance) { os.WriteFile(i.ControlSocketPath(), nil, 0o600) }, state: StateBroken, reason: "stale control socket"},
		{name: "broken after the VM died", setup: func(t *testing.T, i *store.Instance) {
			os.WriteFile(i.BrokenPath(), []byte("the guest kernel panicked: Kernel panic - not syncing: x\n"), 0o600)
		}, state: StateBroken, reason: "the guest kernel panicked"},
		{name: "broken while the host agent unwinds", setup: func(t *testing.T, i *store.Instance) {
			writePID(t, i, os.Getpid())
			serve(t, i, ok)
			os.WriteFile(i.BrokenPath(), []byte("the VM exited unexpectedly: signal: killed\n"), 0o600)
		}, state: StateBroken, reason: "the VM exited unexpectedly"},
		{name: "socket errors", setup: func(t *testing.T, i *store.Instance) {
			writePID(t, i, os.Getpid())
			serve(t, i, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }))
		}, state: StateBroken, reason: "does not answer"},
		{name: "socket hangs", setup: func(t *testing.T, i *store.Instance) {
			writePID(t, i, os.Getpid())
			serve(t, i, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		}, state: StateBroken, reason: "does not answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst := newInst(t)
			tt.setup(t, inst)
			start := time.Now()
			st := Status(context.Background(), inst)
			if st.State != tt.state || !strings.Contains(st.Reason, tt.reason) {
				t.Fatalf("Status = %+v, want %s with %q", st, tt.state, tt.reason)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("Status took %s", d)
			}
			if tt.state == StateRunning && (st.HostAgent == nil || st.HostAgent.Phase != "running") {
				t.Fatalf("Running without decoded host agent status: %+v", st)
			}
		})
	}
}

// deadPID is the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}
