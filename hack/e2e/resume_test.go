//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2EResume boots one docker instance without shares (QEMU cannot
// save a VM with a mounted 9p or virtiofs share) but with a sync mount,
// saves it on stop and resumes it on start: containers keep running, the
// published port answers, the guest clock is right. Before the save, the
// idle cost checks (checkIdleCost): a container's 256 MiB and a removed
// volume's disk blocks go back to the host. After the resume, `vmdock
// migrate` brings images, a volume and a container from a dockerd on the
// host (checkMigrate). Then a changed cpus
// count and a damaged state each boot cold and say why; in that last
// boot the idle pause (checkIdlePause), and the data disk checks clean
// after a stop of the paused VM.
func TestE2EResume(t *testing.T) {
	if os.Getenv("VMDOCK_E2E_RESUME") != "1" {
		t.Skip("set VMDOCK_E2E_RESUME=1 to boot an instance and resume it")
	}
	// The default network mode, in a network of the test's own.
	if !inOwnNetwork(t) {
		return
	}
	e, base := newEnv(t, "amd64")
	defer e.printTimings()
	own := setUpOwnNetwork(t, base)
	companyCA := own.startCorpRegistry(t)
	syncDir := filepath.Join(base, "sync app")
	must(t, os.MkdirAll(syncDir, 0o755))
	must(t, os.WriteFile(filepath.Join(syncDir, "seed.txt"), []byte("seed\n"), 0o644))
	e.configure(fmt.Sprintf("mounts:\n  - location: %q\n    writable: true\n    mode: sync\ncaCerts: [%q]\n", syncDir, companyCA))
	// The default gvisor stack: its fixed gateway MAC and static lease are
	// what let a saved guest's network go on after the resume.
	startArgs := []string{"start", "--cpus", "2", "--memory", "2", "--image", "vmdock"}
	stateFile := filepath.Join(e.home, "default", "state", "vm.state")

	var cold, resumed time.Duration
	e.timed("vmdock start (cold boot)", func(t *testing.T) {
		began := time.Now()
		e.run(15*time.Minute, e.vmdock, startArgs...)
		cold = time.Since(began)
	})
	checkRunsOn(e, "gvisor", "user")
	e.timed("docker load, a counter container and a published web server", func(t *testing.T) {
		e.docker(5*time.Minute, "load", "-i", e.testTar)
		e.docker(3*time.Minute, "run", "-d", "--name", "counter", "-v", "counter:/c", "vmdock-test:latest",
			// Renamed into place: a reader between the shell's truncate and
			// its write would read an empty count.
			"/bin/busybox", "sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /c/count.new; /bin/busybox mv /c/count.new /c/count; sleep 1; done")
		e.docker(3*time.Minute, "run", "-d", "--name", "web", "-p", fmt.Sprintf("%d:80", resumeWebPort), "vmdock-test:latest")
		waitForTestServer(t, resumeWebPort, time.Minute)
	})
	checkOutsideNames(t, e, own)
	e.timed("idle cost: a container's memory and a removed volume's disk space go back to the host", func(t *testing.T) {
		checkIdleCost(t, e)
	})
	countNow := func(t *testing.T) int {
		t.Helper()
		out := e.docker(2*time.Minute, "exec", "counter", "/bin/busybox", "cat", "/c/count")
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("counter file %q: %v", out, err)
		}
		return n
	}
	var countBefore int
	var startedAt string
	marker := fmt.Sprintf("written-before-stop-%d", time.Now().UnixNano())
	e.timed("vmdock stop saves the VM", func(t *testing.T) {
		time.Sleep(3 * time.Second)
		countBefore = countNow(t)
		startedAt = strings.TrimSpace(e.docker(time.Minute, "inspect", "-f", "{{.State.StartedAt}}", "counter"))
		// Written and not synced by hand: the save must flush it.
		e.run(time.Minute, e.vmdock, "ssh", "--", "sh", "-c", "echo "+marker+" > "+dataMount+"/before-stop")
		out := e.run(5*time.Minute, e.vmdock, "stop")
		t.Logf("stop:\n%s", out)
		if !strings.Contains(out, "saved the VM for a fast start") || !strings.Contains(out, "the next start resumes it") {
			t.Fatalf("stop did not save the VM:\n%s", out)
		}
		checkNothingLeft(t, e)
		var st struct {
			Status    string `json:"status"`
			Resumable *struct {
				Bytes int64 `json:"bytes"`
			} `json:"resumable"`
		}
		outJSON, _, _ := e.try(time.Minute, e.vmdock, "status", "--json") // exit 1: not running
		if err := json.Unmarshal([]byte(outJSON), &st); err != nil || st.Status != "Stopped" || st.Resumable == nil || st.Resumable.Bytes <= 0 {
			t.Fatalf("status --json after a saving stop: %v\n%s", err, outJSON)
		}
		text, _, _ := e.try(time.Minute, e.vmdock, "status")
		if !strings.Contains(text, "resumable (saved ") {
			t.Errorf("status does not say resumable:\n%s", text)
		}
		t.Logf("state file: %d bytes", st.Resumable.Bytes)
	})
	e.timed("vmdock start resumes", func(t *testing.T) {
		began := time.Now()
		out := e.run(15*time.Minute, e.vmdock, startArgs...)
		resumed = time.Since(began)
		t.Logf("start:\n%s", out)
		if !strings.Contains(out, "resuming the VM saved") || strings.Contains(out, "booting cold") {
			t.Fatalf("start did not resume:\n%s", out)
		}
		if _, err := os.Stat(stateFile); err == nil {
			t.Errorf("the state file is still there after the resume: a later crash could resume it again")
		}
	})
	e.timed("after the resume: containers run on, port answers, data and clock right", func(t *testing.T) {
		if now := strings.TrimSpace(e.docker(time.Minute, "inspect", "-f", "{{.State.Running}} {{.State.StartedAt}}", "counter")); now != "true "+startedAt {
			t.Errorf("counter container after resume: %q, want running since %s", now, startedAt)
		}
		c1 := countNow(t)
		time.Sleep(3 * time.Second)
		c2 := countNow(t)
		if c1 < countBefore || c2 <= c1 {
			t.Errorf("count before stop %d, after resume %d, 3 s later %d: want it to go on from where it was", countBefore, c1, c2)
		}
		waitForTestServer(t, resumeWebPort, 30*time.Second) // no new docker run
		// The resumed guest's DNS still goes to the host's resolver.
		if out := e.docker(2*time.Minute, "exec", "counter", "/bin/busybox", "nslookup", corpName); !strings.Contains(out, corpIP) {
			t.Errorf("after the resume, a container's nslookup %s:\n%s", corpName, out)
		}
		// Through the stack to the resumed guest's address, not the tunnel.
		e.waitPortPath(t, "tcp", resumeWebPort, "direct")
		if out := e.run(time.Minute, e.vmdock, "ssh", "--", "cat", dataMount+"/before-stop"); strings.TrimSpace(out) != marker {
			t.Errorf("file written before stop reads %q, want %q", out, marker)
		}
		sent := time.Now()
		out := e.run(time.Minute, e.vmdock, "ssh", "--", "date", "+%s.%N")
		rtt := time.Since(sent)
		guest, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
		if err != nil {
			t.Fatalf("guest date %q: %v", out, err)
		}
		mid := float64(sent.Add(rtt/2).UnixNano()) / 1e9
		if skew := guest - mid; skew > 2+rtt.Seconds()/2 || skew < -2-rtt.Seconds()/2 {
			t.Errorf("guest clock is %.2f s off the host's after the resume (exec round trip %s)", skew, rtt)
		}
		// The sync mount's copy lives on the data disk and its sessions
		// come back with the new host agent.
		must(t, os.WriteFile(filepath.Join(syncDir, "after-resume.txt"), []byte("host-edit\n"), 0o644))
		e.run(2*time.Minute, e.vmdock, "sync", "flush")
		if out := e.run(time.Minute, e.vmdock, "ssh", "--", "cat", filepath.Join(syncDir, "after-resume.txt")); strings.TrimSpace(out) != "host-edit" {
			t.Errorf("host edit through the sync mount after the resume: %q", out)
		}
		t.Logf("cold start %.1f s, resume %.1f s (%.2fx)", cold.Seconds(), resumed.Seconds(), resumed.Seconds()/cold.Seconds())
	})
	checkNetworkLoss(t, e, own)
	checkHostFreeze(t, e)
	// Here the instance runs and the checks that follow stop it first, so
	// nothing timed sees the migrated container (removed again anyway).
	checkMigrate(t, e)
	e.timed("a changed cpus count boots cold and says why", func(t *testing.T) {
		e.run(5*time.Minute, e.vmdock, "stop")
		args := append(append([]string(nil), startArgs...), "--cpus", "1")
		out := e.run(15*time.Minute, e.vmdock, args...)
		t.Logf("start:\n%s", out)
		if !strings.Contains(out, "cpus changed since the save (2, now 1)") || !strings.Contains(out, "booting cold") {
			t.Fatalf("start --cpus 1 did not say it boots cold because of cpus:\n%s", out)
		}
		if got := strings.TrimSpace(e.run(time.Minute, e.vmdock, "ssh", "--", "nproc")); got != "1" {
			t.Errorf("guest has %s CPUs, want 1", got)
		}
		if out := e.run(time.Minute, e.vmdock, "ssh", "--", "cat", dataMount+"/before-stop"); strings.TrimSpace(out) != marker {
			t.Errorf("after a cold boot from the saved disks, the file reads %q", out)
		}
	})
	e.timed("a damaged state that passes its checksum boots cold and says why", func(t *testing.T) {
		out := e.run(5*time.Minute, e.vmdock, "stop")
		if !strings.Contains(out, "saved the VM") {
			t.Fatalf("stop did not save:\n%s", out)
		}
		// Damage the stream and fix up the record's checksum, so the
		// start gets past the checksum and the load itself must fail.
		damageKeepingRecord(t, filepath.Dir(stateFile))
		out = e.run(15*time.Minute, e.vmdock, startArgs[0:1]...)
		t.Logf("start:\n%s", out)
		if !strings.Contains(out, "could not resume the saved VM") || !strings.Contains(out, "booting cold") {
			t.Fatalf("start with a damaged state did not say it boots cold:\n%s", out)
		}
		e.docker(2*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "true")
	})
	e.timed("idle pause: pauses after idle 10s, a pause past the keepalive window keeps the session, docker, a forwarded port and sync wake it", func(t *testing.T) {
		checkIdlePause(t, e, syncDir)
	})
	e.timed("stop --no-save of a VM paused while idle powers off; the data disk checks clean", func(t *testing.T) {
		e.waitPause(t, e.idleNow(t).Idle.Pauses+1)
		out := e.run(5*time.Minute, e.vmdock, "stop", "--no-save")
		if strings.Contains(out, "saved the VM") {
			t.Fatalf("stop --no-save saved:\n%s", out)
		}
		checkNothingLeft(t, e)
		if _, err := os.Stat(filepath.Dir(stateFile)); err == nil {
			t.Errorf("a saved state is left after stop --no-save")
		}
		fsck, err := exec.LookPath("e2fsck")
		if err != nil {
			fsck = "/sbin/e2fsck"
		}
		res, err := exec.Command(fsck, "-n", "-f", filepath.Join(e.home, "default", "data.raw")).CombinedOutput()
		if err != nil {
			t.Fatalf("e2fsck -n -f data.raw: %v\n%s", err, res)
		}
		t.Logf("e2fsck:\n%s", res)
	})
}

// damageKeepingRecord overwrites a stretch in the middle of the state file
// and records the damaged file's size and checksum as if it were saved so.
func damageKeepingRecord(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "vm.state")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) / 2; i < len(b)/2+4096 && i < len(b); i++ {
		b[i] = 0x5a
	}
	must(t, os.WriteFile(p, b, 0o600))
	recPath := filepath.Join(dir, "state.json")
	raw, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	// UseNumber: the disk marks are nanosecond times, which float64 would
	// round, and the start would then rightly see changed disks.
	var rec map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	must(t, dec.Decode(&rec))
	st := rec["state"].(map[string]any)
	st["size"] = len(b)
	st["sha256"] = sha256Hex(b)
	out, err := json.Marshal(rec)
	must(t, err)
	must(t, os.WriteFile(recPath, out, 0o600))
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
