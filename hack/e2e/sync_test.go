//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkSync runs on the booted instance with the sync mount at dir (its
// path has a space; seed.txt was put there before start).
func checkSync(t *testing.T, e *env, dir string) {
	inContainer := func(script string) string {
		return e.docker(3*time.Minute, "run", "--rm", "-v", dir+":"+dir, "vmdock-test:latest", "/bin/busybox", "sh", "-c", script)
	}
	flush := func() { e.run(3*time.Minute, e.vmdock, "sync", "flush", dir) }
	e.timed("sync mount: the first sync is complete when start returns", func(t *testing.T) {
		if out := strings.TrimSpace(inContainer(fmt.Sprintf("cat '%s/seed.txt'", dir))); out != "seed" {
			t.Fatalf("container reads %q from the host's seed.txt", out)
		}
		mounts := e.run(2*time.Minute, e.vmdock, "ssh", "--", "cat", "/proc/mounts")
		if fs, _, ok := guestMount(mounts, dir); !ok || fs != "ext4" {
			t.Fatalf("guest mount at %s: %q (found %v); want the guest copy on the data disk (ext4)", dir, fs, ok)
		}
	})
	e.timed("sync mount: 500 files a container writes reach the host", func(t *testing.T) {
		inContainer(fmt.Sprintf("mkdir -p '%[1]s/gen' && i=0; while [ $i -lt 500 ]; do echo $i > '%[1]s/gen/f'$i; i=$((i+1)); done", dir))
		start := time.Now()
		flush()
		entries, err := os.ReadDir(filepath.Join(dir, "gen"))
		if err != nil || len(entries) != 500 {
			t.Fatalf("host has %d of 500 files after a flush (%v)", len(entries), err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "gen", "f499"))
		if strings.TrimSpace(string(b)) != "499" {
			t.Fatalf("f499 on the host holds %q", b)
		}
		fi, err := os.Stat(filepath.Join(dir, "gen", "f0"))
		if err != nil || fi.Mode().Perm() != 0o644 {
			t.Fatalf("f0 on the host: %v, %v; want mode 0644", fi, err)
		}
		t.Logf("500 files on the host %.1f s after the container wrote them (flush)", time.Since(start).Seconds())
	})
	e.timed("sync mount: a host edit reaches a container", func(t *testing.T) {
		f := filepath.Join(dir, "edit.txt")
		if err := os.WriteFile(f, []byte("v1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		deadline := start.Add(30 * time.Second)
		for {
			out, _, _ := e.try(time.Minute, e.vmdock, "ssh", "--", "cat", f)
			if strings.TrimSpace(out) == "v1" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the guest still reads %q from %s 30 s after the host wrote it", out, f)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("host edit visible in the guest after %.1f s (each check is one `vmdock ssh`, itself ~0.3 s)", time.Since(start).Seconds())
	})
	e.timed("sync mount: excluded paths stay in the guest", func(t *testing.T) {
		inContainer(fmt.Sprintf("mkdir -p '%[1]s/node_modules/dep' && echo x > '%[1]s/node_modules/dep/index.js'", dir))
		flush()
		if _, err := os.Stat(filepath.Join(dir, "node_modules")); err == nil {
			t.Fatalf("the excluded node_modules reached the host")
		}
		if out := strings.TrimSpace(inContainer(fmt.Sprintf("cat '%s/node_modules/dep/index.js'", dir))); out != "x" {
			t.Fatalf("the excluded file is gone in the guest: %q", out)
		}
	})
	e.timed("sync mount: a conflict is reported and both versions kept", func(t *testing.T) {
		checkSyncConflict(t, e, dir)
	})
}

// checkSyncConflict edits one file on both sides while the sync is paused,
// so neither side sees the other's edit first.
func checkSyncConflict(t *testing.T, e *env, dir string) {
	name := "both.txt"
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.run(3*time.Minute, e.vmdock, "sync", "flush", dir)
	e.run(time.Minute, e.vmdock, "sync", "pause")
	if err := os.WriteFile(f, []byte("host-version\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.run(time.Minute, e.vmdock, "ssh", "--", "sh", "-c", fmt.Sprintf("echo guest-version > '%s'", f))
	e.run(time.Minute, e.vmdock, "sync", "resume")
	e.try(3*time.Minute, e.vmdock, "sync", "flush", dir)
	status := e.run(time.Minute, e.vmdock, "sync", "status")
	if !strings.Contains(status, "conflict: "+name) {
		t.Fatalf("no conflict reported for %s edited on both sides:\n%s", name, status)
	}
	host, _ := os.ReadFile(f)
	guest, _, _ := e.try(time.Minute, e.vmdock, "ssh", "--", "cat", f)
	if strings.TrimSpace(string(host)) != "host-version" || strings.TrimSpace(guest) != "guest-version" {
		t.Fatalf("conflict on %s: host holds %q, guest %q; want each side's own version kept", name, host, guest)
	}
	t.Logf("conflict reported:\n%s", status)
	// Resolving it: make the sides agree, and the conflict goes.
	if err := os.WriteFile(f, []byte("guest-version\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.run(3*time.Minute, e.vmdock, "sync", "flush", dir)
	if status := e.run(time.Minute, e.vmdock, "sync", "status"); strings.Contains(status, "conflict: "+name) {
		t.Fatalf("conflict still listed after the sides agree:\n%s", status)
	}
}

// writeBeforeStop has a container write a file just before `vmdock stop`;
// checkWrittenBeforeStop finds it on the host after the stop.
func writeBeforeStop(t *testing.T, e *env, dir string) {
	e.docker(3*time.Minute, "run", "--rm", "-v", dir+":"+dir, "vmdock-test:latest", "/bin/busybox", "sh", "-c",
		fmt.Sprintf("echo written-last > '%s/last.txt'", dir))
}

func checkWrittenBeforeStop(t *testing.T, e *env, dir string) {
	e.timed("sync mount: a file written right before stop is on the host after it", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "last.txt"))
		if err != nil || strings.TrimSpace(string(b)) != "written-last" {
			t.Fatalf("last.txt on the host after stop: %q, %v", b, err)
		}
	})
}
