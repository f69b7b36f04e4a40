package store

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/control"
)

// serveHostAgent plays a live host agent in phase/step on inst's control
// socket.
func serveHostAgent(t *testing.T, inst *Instance, phase, step string) {
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

func shortInstance(t *testing.T) *Instance {
	t.Helper()
	dir, err := os.MkdirTemp("", "vmlc") // unix socket paths are short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &Instance{Name: "x", Dir: dir}
}

func TestStatusShowsPhase(t *testing.T) {
	for _, tt := range []struct{ phase, step, state, text string }{
		{"starting", "image", StateStarting, "Starting: image"},
		{"stopping", "", StateStopping, "Stopping"},
		{"running", "", StateRunning, "Running"},
	} {
		inst := shortInstance(t)
		serveHostAgent(t, inst, tt.phase, tt.step)
		st := inst.Status(context.Background())
		if st.State != tt.state || st.String() != tt.text {
			t.Errorf("phase %s: status %s (%q), want %s (%q)", tt.phase, st.State, st.String(), tt.state, tt.text)
		}
	}
}

func TestLockWhileStartingSaysSo(t *testing.T) {
	inst := shortInstance(t)
	serveHostAgent(t, inst, "starting", "image")
	pid, release := lockInOtherProcess(t, inst.Dir)
	defer release()
	_, err := inst.Lock()
	want := []string{"still starting", "step image", "pid " + strconv.Itoa(pid), "vmdock status -p x"}
	for _, w := range want {
		if err == nil || !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), w) {
			t.Fatalf("Lock during a boot: %v; want ErrLocked saying %q", err, w)
		}
	}
}
