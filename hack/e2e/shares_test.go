//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// share is one mount as the e2e configured it: the type the guest must
// use, after "its own type, else mountType".
type share struct{ hostPath, guestPath, fsType string }

// checkShareTypes runs on the booted instance: `vmdock status` lists every
// mount with its resolved type and mode, and the guest has each one
// mounted at its guest path with that file system, writable.
func checkShareTypes(t *testing.T, e *env, shares []share) {
	e.timed("status and the guest agree on each share's type", func(t *testing.T) {
		status := e.run(time.Minute, e.vmdock, "status")
		mounts := e.run(2*time.Minute, e.vmdock, "ssh", "--", "cat", "/proc/mounts")
		for _, sh := range shares {
			want := fmt.Sprintf("%s -> %s (%s, rw)", sh.hostPath, sh.guestPath, sh.fsType)
			if !strings.Contains(status, want) {
				t.Errorf("status lacks %q:\n%s", want, status)
			}
			if fs, opts, ok := guestMount(mounts, sh.guestPath); !ok || fs != sh.fsType || !strings.HasPrefix(opts, "rw") {
				t.Errorf("guest mount at %s: type %q, options %q, found %v; want %s, rw", sh.guestPath, fs, opts, ok, sh.fsType)
			}
		}
	})
}

// guestMount finds the file system type and options of the mount at dir
// in /proc/mounts text, where spaces in paths are written \040.
func guestMount(procMounts, dir string) (fsType, opts string, ok bool) {
	escaped := strings.ReplaceAll(dir, " ", `\040`)
	for _, line := range strings.Split(procMounts, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] == escaped {
			return f[2], f[3], true
		}
	}
	return "", "", false
}

// checkBootReport: the host agent's control API reports the boot's steps
// (what `vmdock bench` reads, instead of parsing logs), each with a
// duration, and the guest's uptime when its agent answered.
func checkBootReport(t *testing.T, statusJSON string) {
	t.Helper()
	var st struct {
		HostAgent struct {
			Boot struct {
				Steps []struct {
					Step    string
					Seconds float64
				}
				GuestUptime float64
			}
		}
	}
	if err := json.Unmarshal([]byte(statusJSON), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, statusJSON)
	}
	b := st.HostAgent.Boot
	seen := map[string]bool{}
	for _, s := range b.Steps {
		if s.Seconds <= 0 {
			t.Errorf("boot step %s took %v s", s.Step, s.Seconds)
		}
		seen[s.Step] = true
	}
	for _, want := range []string{"image", "vm", "agent", "docker-ping"} {
		if !seen[want] {
			t.Errorf("boot report lacks step %q: %+v", want, b.Steps)
		}
	}
	if b.GuestUptime <= 0 {
		t.Errorf("boot report has no guest uptime: %+v", b)
	}
}

// checkExclude: an excluded subfolder of a share lives on the guest's data
// disk. A container writing into it through the share's bind mount writes
// to ext4 in the guest, and the host sees only the empty mount point.
func checkExclude(t *testing.T, e *env, share, sub string) {
	e.timed("share exclude: container writes stay in the guest, on its disk", func(t *testing.T) {
		guestDir := filepath.Join(share, sub)
		out := e.docker(3*time.Minute, "run", "--rm", "-v", share+":"+share, "vmdock-test:latest",
			"/bin/busybox", "sh", "-c", fmt.Sprintf("mkdir -p '%[1]s/pkg' && echo dep > '%[1]s/pkg/index.js' && cat '%[1]s/pkg/index.js'", guestDir))
		if strings.TrimSpace(out) != "dep" {
			t.Fatalf("container wrote and read %q", out)
		}
		entries, err := os.ReadDir(guestDir)
		if err != nil || len(entries) != 0 {
			t.Fatalf("host side of the excluded %s: %v entries (%v); want an empty folder", guestDir, len(entries), err)
		}
		mounts := e.run(2*time.Minute, e.vmdock, "ssh", "--", "cat", "/proc/mounts")
		if fs, _, ok := guestMount(mounts, guestDir); !ok || fs != "ext4" {
			t.Fatalf("guest mount at %s: %q (found %v); want the data disk's ext4", guestDir, fs, ok)
		}
	})
}

// checkExcludeKept: what a container put in an excluded folder is still
// there after a stop and start (it lives on the data disk).
func checkExcludeKept(t *testing.T, e *env, share, sub string) {
	e.timed("share exclude: contents kept across stop/start", func(t *testing.T) {
		f := filepath.Join(share, sub, "pkg", "index.js")
		out := e.run(2*time.Minute, e.vmdock, "ssh", "--", "cat", f)
		if strings.TrimSpace(out) != "dep" {
			t.Fatalf("after restart the guest reads %q from %s", out, f)
		}
		if _, err := os.Stat(f); err == nil {
			t.Fatalf("%s appeared on the host", f)
		}
	})
}

// checkShareInotify: a file watcher in a container (the test image's
// echo-server -inotify, as webpack or nodemon would) learns of a host edit
// in a shared folder; virtiofs and 9p raise no inotify events on their
// own, the guest agent's touch does.
func checkShareInotify(t *testing.T, e *env, share string) {
	e.timed("share inotify: a container watcher sees a host edit", func(t *testing.T) {
		e.docker(3*time.Minute, "run", "-d", "--name", "inotify-watch", "-v", share+":"+share, "vmdock-test:latest", "/echo-server", "-inotify", share)
		defer e.try(time.Minute, "docker", "--context", "vmdock", "rm", "-f", "inotify-watch")
		waitLogs := func(want string, within time.Duration) (time.Duration, bool) {
			start := time.Now()
			for time.Since(start) < within {
				out, errOut, _ := e.try(time.Minute, "docker", "--context", "vmdock", "logs", "inotify-watch")
				if strings.Contains(out+errOut, want) {
					return time.Since(start), true
				}
				time.Sleep(100 * time.Millisecond)
			}
			return 0, false
		}
		if _, ok := waitLogs("watching", time.Minute); !ok {
			t.Fatal("the container's watcher did not start")
		}
		if err := os.WriteFile(filepath.Join(share, "edited-on-host.txt"), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d, ok := waitLogs("edited-on-host.txt", 10*time.Second)
		if !ok {
			t.Fatal("the container's watcher saw no event for a host edit within 10 s")
		}
		t.Logf("container watcher saw the host edit after %.2f s (each check is one `docker logs`)", d.Seconds())
	})
}
