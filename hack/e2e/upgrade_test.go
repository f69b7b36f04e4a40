//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// upgradeFrom is the earlier vmdock whose instance folder the upgrade
// check starts under this one: the last commit whose folders carry no
// format record (vm/layout's format 3). VMDOCK_UPGRADE_FROM overrides it.
const upgradeFrom = "084bb9f"

// upgradeWebPort is the restarted container's published port.
const upgradeWebPort = 18197

// TestE2EUpgrade makes an instance folder with an earlier vmdock (a fixed
// commit's build in bin/, booting the current image: what is tested is
// the folder, its saved state and the data disk), with an image, a
// volume and a container with a restart policy, and stops it with a saved
// state. This vmdock then starts it: the folder is migrated to the
// current format, the saved state is resumed or dropped with one line
// (never a failed start), and the data disk (same file), the image, the
// volume's data, the container (restarted by its policy, its port
// answering) and the config come through.
func TestE2EUpgrade(t *testing.T) {
	if os.Getenv("VMDOCK_E2E_UPGRADE") != "1" {
		t.Skip("set VMDOCK_E2E_UPGRADE=1 to build an earlier vmdock and start its instance under this one")
	}
	e, _ := newEnv(t, "amd64")
	defer e.printTimings()
	from := os.Getenv("VMDOCK_UPGRADE_FROM")
	if from == "" {
		from = upgradeFrom
	}
	var old string
	e.timed("build vmdock "+from+" into bin/", func(t *testing.T) { old = buildOldVmdock(t, e.repo, from) })
	e.configure("mounts: []\n")
	startArgs := []string{"start", "--cpus", "2", "--memory", "2", "--network-mode", "isolated", "--image", "vmdock"}
	dir := filepath.Join(e.home, "default")
	marker := fmt.Sprintf("kept-%d", time.Now().UnixNano())
	e.timed("vmdock "+from+": start, an image, a volume, a container that restarts, stop with a saved state", func(t *testing.T) {
		e.run(15*time.Minute, old, startArgs...)
		e.docker(5*time.Minute, "load", "-i", e.testTar)
		e.docker(3*time.Minute, "run", "-d", "--name", "keeper", "--restart", "always", "-v", "keepvol:/data",
			"-p", fmt.Sprintf("%d:80", upgradeWebPort), "vmdock-test:latest",
			"/bin/busybox", "sh", "-c", "echo "+marker+" > /data/marker && exec /echo-server")
		waitForTestServer(t, upgradeWebPort, time.Minute)
		out := e.run(5*time.Minute, old, "stop")
		t.Logf("old stop:\n%s", out)
		if _, err := os.Stat(filepath.Join(dir, "format")); err == nil {
			t.Fatalf("vmdock %s wrote a format record: pick an older VMDOCK_UPGRADE_FROM", from)
		}
	})
	cfgBefore := statusConfig(t, e)
	dataInode := inode(t, filepath.Join(dir, "data.raw"))
	e.timed("this vmdock starts the old folder: migrated, resumed or cold with one line", func(t *testing.T) {
		out := e.run(15*time.Minute, e.vmdock, startArgs[:1]...)
		t.Logf("new start:\n%s", out)
		if !strings.Contains(out, "resuming the VM saved") && strings.Count(out, "booting cold") != 1 {
			t.Errorf("start neither resumed nor said once why it boots cold:\n%s", out)
		}
		if got := inode(t, filepath.Join(dir, "data.raw")); got != dataInode {
			t.Errorf("the data disk is another file after the upgrade (inode %d, was %d)", got, dataInode)
		}
	})
	e.timed("after the upgrade: format, config, image, volume, container and port", func(t *testing.T) {
		var st struct {
			Format          int    `json:"format"`
			FormatWrittenBy string `json:"formatWrittenBy"`
		}
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil || st.Format < 4 || st.FormatWrittenBy == "" {
			t.Errorf("status --json after the upgrade: format %d by %q (%v)", st.Format, st.FormatWrittenBy, err)
		}
		if cfg := statusConfig(t, e); cfg != cfgBefore {
			t.Errorf("config after the upgrade:\n%s\nwas\n%s", cfg, cfgBefore)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for strings.TrimSpace(e.docker(time.Minute, "inspect", "-f", "{{.State.Running}}", "keeper")) != "true" {
			if time.Now().After(deadline) {
				t.Fatal("the container with --restart always is not running after the upgrade")
			}
			time.Sleep(time.Second)
		}
		if got := strings.TrimSpace(e.docker(time.Minute, "exec", "keeper", "/bin/busybox", "cat", "/data/marker")); got != marker {
			t.Errorf("the volume's file reads %q, want %q", got, marker)
		}
		waitForTestServer(t, upgradeWebPort, time.Minute)
		e.run(5*time.Minute, e.vmdock, "stop")
	})
}

// buildOldVmdock builds commit's vmdock (with its own embedded guest
// agents) in a git worktree and copies it to bin/vmdock-<commit>, where
// it finds the current image build as bin/vmdock does. A binary already
// there is reused.
func buildOldVmdock(t *testing.T, repo, commit string) string {
	dst := filepath.Join(repo, "bin", "vmdock-"+commit)
	if _, err := os.Stat(dst); err == nil {
		return dst
	}
	wt := filepath.Join(t.TempDir(), "old")
	gitRun := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gitRun("worktree", "add", "--detach", wt, commit)
	defer gitRun("worktree", "remove", "--force", wt)
	cmd := exec.Command("make", "build")
	cmd.Dir = wt
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build at %s: %v\n%s", commit, err, out)
	}
	b, err := os.ReadFile(filepath.Join(wt, "bin", "vmdock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// statusConfig is the instance's config as status --json shows it.
func statusConfig(t *testing.T, e *env) string {
	t.Helper()
	out, _, _ := e.try(time.Minute, e.vmdock, "status", "--json") // exit 1 unless running
	var st struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Config) == 0 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return string(st.Config)
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
