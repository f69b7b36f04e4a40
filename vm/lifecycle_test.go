package vm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// madeByVMDock is a folder as vmdock and QEMU leave it, temp files and
// rotated logs included.
var madeByVMDock = []string{
	"vmdock.yaml", "lock", "disk.raw", "data.raw", "boot.iso", "ha.pid", "state.json", "spec.json",
	"serial.log", "serial.log.1", "hostagent.log", "hostagent.log.1", "guestagent.log", "broken",
	"image.digest", "qemu.log", "qemu.pid", "efi-vars.fd", "virtiofsd-0.pid", "virtiofs-1.sock",
	".vmdock.yaml.12345", ".boot-999.iso", "state.json.tmp", "disk.raw.tmp",
}

func deleteEnv(t *testing.T) string {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	return t.TempDir()
}

func TestDeleteRemovesOnlyVMDockFiles(t *testing.T) {
	home := deleteEnv(t)
	inst, _ := OpenInstance(home, "x")
	inst.Create()
	touch(t, inst.Dir, madeByVMDock...)
	touch(t, inst.Dir, "notes.txt", "disk.raw.bak")
	os.Mkdir(filepath.Join(inst.Dir, "photos"), 0o700)
	var out bytes.Buffer
	if err := Delete(context.Background(), inst, DeleteOptions{Data: true, Progress: &out}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listDir(t, inst.Dir), " "); got != "disk.raw.bak notes.txt photos" {
		t.Fatalf("left %q, want only the files vmdock did not make", got)
	}
	if !strings.Contains(out.String(), "kept "+inst.Dir) || !strings.Contains(out.String(), "notes.txt") {
		t.Fatalf("delete said %q, want it to name the folder kept and why", out.String())
	}
}

func TestDeleteData(t *testing.T) {
	home := deleteEnv(t)
	inst, _ := OpenInstance(home, "x")
	inst.Create()
	touch(t, inst.Dir, madeByVMDock...)
	if err := Delete(context.Background(), inst, DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listDir(t, inst.Dir), " "); got != "data.raw lock" {
		t.Fatalf("plain delete left %q, want the data disk and lock", got)
	}
	var out bytes.Buffer
	if err := Delete(context.Background(), inst, DeleteOptions{Data: true, Progress: &out}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inst.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("delete --data of a folder of vmdock's files kept it: %v (%s)", err, out.String())
	}
}

func TestDeleteRefusesSymlinkedFolder(t *testing.T) {
	home := deleteEnv(t)
	target := t.TempDir()
	touch(t, target, "vmdock.yaml", "data.raw", "thesis.tex")
	if err := os.Symlink(target, filepath.Join(home, "x")); err != nil {
		t.Fatal(err)
	}
	inst, _ := OpenInstance(home, "x")
	before := listDir(t, target)
	err := Delete(context.Background(), inst, DeleteOptions{Data: true, Force: true})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("delete through a symlink: %v; want a one-line refusal", err)
	}
	if after := listDir(t, target); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("link target changed: %v -> %v", before, after)
	}
	if fi, err := os.Lstat(inst.Dir); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link itself changed: %v", err)
	}
}

func TestIsInstanceFile(t *testing.T) {
	for _, n := range madeByVMDock {
		if !isInstanceFile(n) {
			t.Errorf("%s: not recognised as vmdock's", n)
		}
	}
	for _, n := range []string{"notes.txt", "disk.raw.bak", "vmdock.yaml~", "serial.log.2", "data.raw.1", ".bashrc", "virtiofsd-0.pid.old"} {
		if isInstanceFile(n) {
			t.Errorf("%s: taken for vmdock's", n)
		}
	}
}

// serveHostAgent plays a live host agent in phase/step on inst's control
// socket.
func serveHostAgent(t *testing.T, inst *Instance, phase, step string) {
	t.Helper()
	ln, err := net.Listen("unix", inst.ControlSocketPath())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(HostAgentStatus{PID: os.Getpid(), Phase: phase, Step: step})
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
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelper$")
	cmd.Env = append(os.Environ(), "VMDOCK_TEST_LOCK_DIR="+inst.Dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper said %q", line)
	}
	_, err := inst.Lock()
	want := []string{"still starting", "step image", "pid " + strconv.Itoa(cmd.Process.Pid), "vmdock status -p x"}
	for _, w := range want {
		if err == nil || !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), w) {
			t.Fatalf("Lock during a boot: %v; want ErrLocked saying %q", err, w)
		}
	}
}
