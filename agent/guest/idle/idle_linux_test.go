package idle

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeProc adds a process to a fake /proc.
func writeProc(t *testing.T, proc string, pid int, comm string, ppid int) {
	t.Helper()
	dir := filepath.Join(proc, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := strconv.Itoa(pid) + " (" + comm + ") S " + strconv.Itoa(ppid) + " 1 1 0 -1 4194560 100 0 0 0\n"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Containers are the shims' children, whatever runtime made the shim; a
// shim whose task ended (no child) is no running container.
func TestRunningContainers(t *testing.T) {
	proc := t.TempDir()
	os.WriteFile(filepath.Join(proc, "uptime"), []byte("1.0 1.0\n"), 0o644)
	writeProc(t, proc, 1, "systemd", 0)
	writeProc(t, proc, 300, "dockerd", 1)
	writeProc(t, proc, 310, "containerd", 1)
	n, err := RunningContainers(proc)
	if err != nil || n != 0 {
		t.Fatalf("no shims: %d, %v; want 0", n, err)
	}
	writeProc(t, proc, 400, "containerd-shim-runc-v2", 1)
	writeProc(t, proc, 401, "nginx: master (x)", 400) // a name with spaces and parentheses
	writeProc(t, proc, 402, "nginx: worker", 401)     // the container's own children do not count
	writeProc(t, proc, 500, "containerd-shim-runc-v2", 1)
	writeProc(t, proc, 501, "sleep", 500)
	writeProc(t, proc, 600, "containerd-shim-runc-v2", 1) // task exited, not deleted yet
	if n, err := RunningContainers(proc); err != nil || n != 2 {
		t.Fatalf("two containers: %d, %v; want 2", n, err)
	}
	if _, err := RunningContainers(filepath.Join(proc, "missing")); err == nil {
		t.Error("an unreadable /proc gave no error")
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		comm string
		ppid int
		ok   bool
	}{
		{"12 (bash) S 7 12 12", "bash", 7, true},
		{"13 (a (b) c) R 9 1", "a (b) c", 9, true},
		{"14 (x) S", "", 0, false},
		{"garbage", "", 0, false},
		{"15 (y) S notanumber", "", 0, false},
	} {
		comm, ppid, ok := parseStat(tc.in)
		if comm != tc.comm || ppid != tc.ppid || ok != tc.ok {
			t.Errorf("parseStat(%q) = %q, %d, %v; want %q, %d, %v", tc.in, comm, ppid, ok, tc.comm, tc.ppid, tc.ok)
		}
	}
}
