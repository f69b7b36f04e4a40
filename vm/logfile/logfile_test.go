package logfile

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), n), 0o600); err != nil {
		t.Fatal(err)
	}
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestRotate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.log")
	if err := Rotate(p, 10); err != nil {
		t.Fatalf("missing file: %v", err)
	}
	write(t, p, 9)
	if err := Rotate(p, 10); err != nil {
		t.Fatal(err)
	}
	if size(t, p) != 9 {
		t.Fatal("a file under the cap was rotated")
	}
	if _, err := os.Stat(p + OldSuffix); err == nil {
		t.Fatal("a file under the cap made a .1")
	}
	write(t, p+OldSuffix, 3) // an older copy is replaced, never a .2
	write(t, p, 10)
	if err := Rotate(p, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("log still there after rotation: %v", err)
	}
	if size(t, p+OldSuffix) != 10 {
		t.Fatal("the .1 copy is not the rotated file")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
		t.Fatalf("files after rotation: %v, want only the .1", m)
	}
}

func TestWriterCapsAndKeepsLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "g.log")
	w, err := Open(p, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var lines []string
	for i := 0; i < 50; i++ {
		l := fmt.Sprintf("line %03d xxxxxxxxxxxxxxxxx\n", i) // 27 bytes
		lines = append(lines, l)
		if n, err := w.Write([]byte(l)); err != nil || n != len(l) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	cur, _ := os.ReadFile(p)
	old, _ := os.ReadFile(p + OldSuffix)
	if len(cur) > 100 || len(old) > 100 {
		t.Fatalf("sizes %d and %d, cap 100", len(cur), len(old))
	}
	// What is kept is the newest lines, whole and in order.
	kept := string(old) + string(cur)
	want := strings.Join(lines, "")
	if !strings.HasSuffix(want, kept) || len(kept) < 100 {
		t.Fatalf("kept %q, not the end of what was written", kept)
	}
	big := strings.Repeat("y", 150) + "\n"
	if _, err := w.Write([]byte(big)); err != nil {
		t.Fatal(err)
	}
	if cur, _ := os.ReadFile(p); string(cur) != big {
		t.Fatalf("a write over the cap was split or lost: %q", cur)
	}
}

func TestWriterRotatesAtOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "g.log")
	write(t, p, 100)
	w, err := Open(p, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write([]byte("new\n"))
	if cur, _ := os.ReadFile(p); string(cur) != "new\n" {
		t.Fatalf("log after open = %q, want a fresh file", cur)
	}
	if size(t, p+OldSuffix) != 100 {
		t.Fatal("full log was not kept as .1")
	}
}

// TestStderrHelper is not a test: it is the process whose stderr is the
// log in TestStderrRotator.
func TestStderrHelper(t *testing.T) {
	path := os.Getenv("LOGFILE_TEST_PATH")
	if path == "" {
		t.Skip("helper process only")
	}
	stop := make(chan struct{})
	if !StderrRotator(path, 1000, 5*time.Millisecond, stop) {
		fmt.Println("not rotating")
		os.Exit(1)
	}
	for i := 0; i < 60; i++ {
		fmt.Fprintf(os.Stderr, "%03d %s\n", i, strings.Repeat("z", 95))
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	fmt.Fprintln(os.Stderr, "last line")
	os.Exit(0)
}

func TestStderrRotator(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hostagent.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStderrHelper$")
	cmd.Env = append(os.Environ(), "LOGFILE_TEST_PATH="+path)
	cmd.Stderr = f
	out, err := cmd.Output()
	f.Close()
	if err != nil {
		t.Fatalf("helper: %v, %s", err, out)
	}
	cur, _ := os.ReadFile(path)
	old, err := os.ReadFile(path + OldSuffix)
	if err != nil {
		t.Fatalf("no rotated copy: %v", err)
	}
	// The check runs every 5 ms against 100-byte lines written every 2 ms:
	// a file may pass the cap by a few lines before it moves, never by much.
	if len(cur) > 2000 || len(old) > 2000 {
		t.Fatalf("sizes %d and %d with a cap of 1000", len(cur), len(old))
	}
	if !strings.HasSuffix(string(cur), "last line\n") {
		t.Fatalf("the newest output did not reach the new file: %q", cur)
	}
	// Not a log file: a host agent in the foreground writes to a terminal
	// or pipe and must not rotate anything.
	if StderrRotator(path, 1000, time.Millisecond, nil) {
		t.Fatal("rotating a log that is not this process's stderr")
	}
}
