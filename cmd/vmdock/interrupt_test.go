package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/instance"
	"github.com/vmdock/vmdock/vm/store"
)

// readyFile, created in the instance folder, lets the slow fake host agent
// finish its boot.
const readyFile = "fake-ready"

// TestSlowHostAgent is not a test: it is a host agent that begins the
// image step and stays there until readyFile appears in its folder (vmdock
// start runs it there), then reports ready and serves until stopped.
func TestSlowHostAgent(t *testing.T) {
	if os.Getenv("VMDOCK_TEST_SLOW_HA") == "" {
		t.Skip("helper process only")
	}
	ready := func() bool { _, err := os.Stat(readyFile); return err == nil }
	os.WriteFile("ha.pid", []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o600)
	ln, err := net.Listen("unix", "ha.sock")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stopped := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+control.StatusPath, func(w http.ResponseWriter, r *http.Request) {
		st := control.Status{PID: os.Getpid(), Phase: "starting", Step: "image"}
		if ready() {
			st.Phase, st.Step = "running", ""
		}
		json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("GET "+control.EventsPath, func(w http.ResponseWriter, r *http.Request) {
		enc := json.NewEncoder(w)
		send := func(step, state string) {
			enc.Encode(control.Event{Step: step, State: state, Detail: "1s"})
			w.(http.Flusher).Flush()
		}
		send("image", "begin")
		for !ready() {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		send("image", "done")
		send("ready", "ready")
		<-r.Context().Done()
	})
	mux.HandleFunc("POST "+control.StopPath, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		close(stopped)
	})
	go http.Serve(ln, mux)
	<-stopped
	os.Remove("ha.sock")
	os.Remove("ha.pid")
	os.Exit(0)
}

// startWithSlowHostAgent makes `start` spawn the slow fake host agent.
func startWithSlowHostAgent(t *testing.T) {
	saved, savedImage := startVM, prepareImage
	// The fake host agent boots nothing: no image to fetch for it.
	prepareImage = func(context.Context, *store.Instance, config.Config, bool, io.Writer) error { return nil }
	startVM = func(ctx context.Context, inst *store.Instance, cfg config.Config, opts instance.StartOptions) error {
		opts.HostAgentArgs = []string{os.Args[0], "-test.run=^TestSlowHostAgent$"}
		return instance.Start(ctx, inst, cfg, opts)
	}
	if t != nil {
		t.Cleanup(func() { startVM, prepareImage = saved, savedImage })
	}
}

// TestStartCLI is not a test: it is `vmdock start` as a process of its own,
// interruptible like the real one, with the slow fake host agent.
func TestStartCLI(t *testing.T) {
	if os.Getenv("VMDOCK_TEST_START_CLI") == "" {
		t.Skip("helper process only")
	}
	startWithSlowHostAgent(nil)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	root := newRootCmd(testHost)
	root.SetArgs([]string{"start"})
	err := root.ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

func TestCtrlCOnStart(t *testing.T) {
	home, _ := env(t)
	dockerCfg := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dockerCfg)
	t.Setenv("VMDOCK_TEST_SLOW_HA", "1")
	inst := filepath.Join(home, "default")

	cli := exec.Command(os.Args[0], "-test.run=^TestStartCLI$")
	cli.Env = append(os.Environ(), "VMDOCK_TEST_START_CLI=1")
	var stderr strings.Builder
	cli.Stderr = &stderr
	out, _ := cli.StdoutPipe()
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	haPID := 0
	t.Cleanup(func() {
		cli.Process.Kill()
		if haPID > 0 {
			syscall.Kill(haPID, syscall.SIGKILL)
		}
	})
	lines := bufio.NewScanner(out)
	for lines.Scan() && !strings.Contains(lines.Text(), "image ...") {
	}
	b, err := os.ReadFile(filepath.Join(inst, "ha.pid"))
	if _, serr := fmt.Sscan(string(b), &haPID); err != nil || serr != nil {
		t.Fatalf("no host agent pid: %v %v", err, serr)
	}

	// While the first start holds the lock, a second one says why at once.
	startWithSlowHostAgent(t)
	began := time.Now()
	if _, err := run("start"); err == nil || !strings.Contains(err.Error(), "still starting") || !strings.Contains(err.Error(), "vmdock status") {
		t.Fatalf("second start during the boot: %v; want the instance is still starting", err)
	} else if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("second start took %s to refuse", d)
	}

	cli.Process.Signal(os.Interrupt)
	waited := make(chan error, 1)
	go func() { waited <- cli.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("start did not end within 5 s of Ctrl-C")
	}
	if err == nil {
		t.Fatal("interrupted start exited 0")
	}
	msg := stderr.String()
	for _, want := range []string{"goes on in the background", fmt.Sprintf("host agent pid %d", haPID), "vmdock start -p default", "vmdock stop -p default"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("interrupted start said %q; want %q", msg, want)
		}
	}
	if strings.Contains(msg, "exited before") {
		t.Fatalf("interrupted start claims the host agent exited: %q", msg)
	}
	if syscall.Kill(haPID, 0) != nil {
		t.Fatal("the host agent did not survive Ctrl-C on start")
	}
	if out, _ := run("status"); !strings.Contains(out, "Starting: image") {
		t.Fatalf("status during the boot:\n%s\nwant Starting: image", out)
	}

	// A new start follows the boot under way and finishes it.
	done := make(chan error, 1)
	var second string
	go func() {
		var err error
		second, err = run("start")
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("start returned before the boot was ready: %v\n%s", err, second)
	default:
	}
	if err := os.WriteFile(filepath.Join(inst, readyFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("start following the boot: %v\n%s", err, second)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("start did not return when the boot was ready")
	}
	if !strings.Contains(second, "already starting") || !strings.Contains(second, "is running") {
		t.Fatalf("second start said:\n%s", second)
	}
	cfg, _ := os.ReadFile(filepath.Join(dockerCfg, "config.json"))
	if !strings.Contains(string(cfg), `"currentContext": "vmdock"`) {
		t.Fatalf("the docker context was not switched after the followed boot: %s", cfg)
	}
}
