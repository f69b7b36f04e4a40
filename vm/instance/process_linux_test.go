package instance

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vmdock/vmdock/vm/store"
)

// TestSleeper is not a test: it is a process that looks like a host agent
// (its arguments go after the test flags) for TestCleanupStaleKillsOnlyOwnHostAgent.
func TestSleeper(t *testing.T) {
	if os.Getenv("VMDOCK_TEST_SLEEPER") == "" {
		t.Skip("helper process only")
	}
	os.Stdout.WriteString("up\n")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// sleeper starts a process with args in dir and waits until it runs; the
// channel closes when it has exited and been reaped.
func sleeper(t *testing.T, dir string, args ...string) (int, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestSleeper$"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "VMDOCK_TEST_SLEEPER=1")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "up\n" {
		t.Fatalf("sleeper said %q", line)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return cmd.Process.Pid, done
}

func TestCleanupStaleKillsOnlyOwnHostAgent(t *testing.T) {
	home := t.TempDir()
	otherHome := t.TempDir()
	tests := []struct {
		name    string
		dir     func(inst *store.Instance) string
		args    []string
		pidFile func(t *testing.T, path string) // touches the pid file after the process started
		killed  bool
	}{
		{name: "own host agent", args: []string{"hostagent", "--profile", "x"}, killed: true},
		{name: "own, -p form", args: []string{"hostagent", "-p", "x"}, killed: true},
		{name: "other profile", args: []string{"hostagent", "--profile", "y"}},
		{name: "same profile, other VMDOCK_HOME", args: []string{"hostagent", "--profile", "x"},
			dir: func(*store.Instance) string { d := filepath.Join(otherHome, "x"); os.MkdirAll(d, 0o700); return d }},
		{name: "not a host agent", args: []string{"serve", "--profile", "x"}},
		{name: "pid reused after the pid file was written", args: []string{"hostagent", "--profile", "x"},
			pidFile: func(t *testing.T, path string) {
				old := time.Now().Add(-time.Minute)
				if err := os.Chtimes(path, old, old); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(home, "x"))
			inst, _ := store.Open(home, "x")
			if err := inst.Create(); err != nil {
				t.Fatal(err)
			}
			dir := inst.Dir
			if tt.dir != nil {
				dir = tt.dir(inst)
			}
			pid, done := sleeper(t, dir, tt.args...)
			if err := os.WriteFile(inst.PIDPath(), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.pidFile != nil {
				tt.pidFile(t, inst.PIDPath())
			}
			if err := cleanupStale(inst); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
				if !tt.killed {
					t.Fatal("cleanup killed a process that is not this instance's host agent")
				}
			case <-time.After(time.Second):
				if tt.killed {
					t.Fatal("cleanup left the instance's own stale host agent running")
				}
			}
			if _, err := os.Stat(inst.PIDPath()); !os.IsNotExist(err) {
				t.Fatalf("stale pid file still there: %v", err)
			}
		})
	}
}

func TestHostAgentProfile(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
		ok   bool
	}{
		{[]string{"/bin/vmdock", "hostagent", "--profile", "dev"}, "dev", true},
		{[]string{"vmdock", "hostagent", "--profile=dev"}, "dev", true},
		{[]string{"vmdock", "hostagent", "-pdev"}, "dev", true},
		{[]string{"vmdock", "--debug", "hostagent", "--debug", "dev"}, "dev", true},
		{[]string{"vmdock", "hostagent"}, "", false},
		{[]string{"vim", "hostagent.go"}, "", false},
		{[]string{"vmdock", "start", "--profile", "dev"}, "", false},
	} {
		got, ok := hostAgentProfile(tt.args)
		if got != tt.want || ok != tt.ok {
			t.Errorf("hostAgentProfile(%q) = %q, %v; want %q, %v", tt.args, got, ok, tt.want, tt.ok)
		}
	}
}
