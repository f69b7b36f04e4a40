package review

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// localGuest runs the guest's commands on this machine (real tar and
// sh), its copy in a folder of its own.
func localGuest(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout = stdin, stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return &runError{err: err, stderr: stderr.String()}
	}
	return nil
}

type runError struct {
	err    error
	stderr string
}

func (e *runError) Error() string { return e.err.Error() + ": " + e.stderr }

func put(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if os.IsNotExist(err) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// copyTree is the sync's first pass: the guest starts as the host is.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from+"/.", to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

// The agent edits, creates and deletes in the guest; the host edits one
// of the same files meanwhile and another on its own. The diff shows the
// agent's changes only (the conflict marked, a binary file named);
// accept writes them but the conflicting one, which it lists; nothing
// reached the host before; reject puts the host's version back in the
// guest.
func TestDiffAcceptRejectWithAConflictingHostEdit(t *testing.T) {
	host, guest, inst := t.TempDir(), t.TempDir(), t.TempDir()
	put(t, host, "main.go", "package main\n\nfunc main() {}\n")
	put(t, host, "shared.txt", "one\n")
	put(t, host, "old.txt", "old\n")
	put(t, host, "host-only.txt", "host\n")
	w := Workspace{Host: host, GuestPath: guest, BasePath: filepath.Join(inst, "base.json"), Guest: localGuest}
	if err := RecordBase(host, w.BasePath); err != nil {
		t.Fatal(err)
	}
	copyTree(t, host, guest)

	put(t, guest, "main.go", "package main\n\nfunc main() { println(\"agent\") }\n")
	put(t, guest, "shared.txt", "agent\n")
	put(t, guest, "pkg/new.go", "package pkg\n")
	put(t, guest, "blob.bin", "\x00\x01\x02")
	if err := os.Remove(filepath.Join(guest, "old.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/home/user/.ssh", filepath.Join(guest, "keys")); err != nil {
		t.Fatal(err)
	}
	put(t, host, "shared.txt", "host edit\n")
	put(t, host, "host-only.txt", "host edit\n")

	ctx := context.Background()
	r, err := w.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var diff bytes.Buffer
	if err := r.WriteDiff(&diff); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"--- a/main.go\n+++ b/main.go\n", "+func main() { println(\"agent\") }\n",
		"--- /dev/null\n+++ b/pkg/new.go\n", "--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n",
		"Binary files /dev/null and b/blob.bin differ\n", "# shared.txt: changed on the host too",
		"+symlink -> /home/user/.ssh\n",
	} {
		if !strings.Contains(diff.String(), want) {
			t.Errorf("the diff lacks %q:\n%s", want, diff.String())
		}
	}
	if strings.Contains(diff.String(), "host-only.txt") {
		t.Errorf("the diff shows the host's own edit:\n%s", diff.String())
	}
	if read(t, host, "main.go") != "package main\n\nfunc main() {}\n" || read(t, host, "pkg/new.go") != "<missing>" {
		t.Fatal("an agent's edit reached the host before accept")
	}

	accepted, refused, err := r.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(accepted, ","); got != "blob.bin,main.go,old.txt,pkg/new.go" {
		t.Errorf("accepted %s", got)
	}
	if len(refused) != 2 || refused[0].Path != "keys" || refused[1].Path != "shared.txt" || !strings.Contains(refused[1].Why, "changed on the host") {
		t.Errorf("refused %+v; want keys (a symlink out) and shared.txt (changed on the host)", refused)
	}
	if read(t, host, "main.go") != read(t, guest, "main.go") || read(t, host, "pkg/new.go") != "package pkg\n" || read(t, host, "old.txt") != "<missing>" {
		t.Error("accepted changes are not on the host")
	}
	if read(t, host, "shared.txt") != "host edit\n" {
		t.Error("accept overwrote the host's edit")
	}
	if _, err := os.Lstat(filepath.Join(host, "keys")); !os.IsNotExist(err) {
		t.Error("accept made a symlink out of the workspace")
	}

	r, err = w.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Changes); n != 2 {
		t.Fatalf("after accept %d changes left, want 2 (keys, shared.txt): %+v", n, r.Changes)
	}
	if _, err := r.Reject(ctx, []string{"shared.txt", "keys"}); err != nil {
		t.Fatal(err)
	}
	if read(t, guest, "shared.txt") != "host edit\n" {
		t.Errorf("after reject the guest has %q", read(t, guest, "shared.txt"))
	}
	if _, err := os.Lstat(filepath.Join(guest, "keys")); !os.IsNotExist(err) {
		t.Error("reject left the agent's symlink in the guest")
	}
	if r, err = w.Read(ctx); err != nil || len(r.Changes) != 0 {
		t.Fatalf("after reject: %+v, %v; want no change", r.Changes, err)
	}
	if _, _, err := r.Accept([]string{"../etc/passwd"}); err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("accept ../etc/passwd: %v", err)
	}
}

// Without a recorded base (a sandbox made in its YAML), the host's folder
// stands for it: the agent's edit is a change accept writes, not a
// conflict it refuses.
func TestNoBaseTakesTheHostAsIs(t *testing.T) {
	host, guest := t.TempDir(), t.TempDir()
	put(t, host, "a.txt", "a\n")
	copyTree(t, host, guest)
	put(t, guest, "a.txt", "agent\n")
	w := Workspace{Host: host, GuestPath: guest, BasePath: filepath.Join(t.TempDir(), "base.json"), Guest: localGuest}
	r, err := w.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Changes) != 1 || r.Changes[0].Conflict {
		t.Fatalf("changes %+v; want a.txt, no conflict", r.Changes)
	}
	if accepted, refused, err := r.Accept(nil); err != nil || len(accepted) != 1 || len(refused) != 0 || read(t, host, "a.txt") != "agent\n" {
		t.Fatalf("accept: %v %v %v", accepted, refused, err)
	}
}
