//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// reliabilityRow is one line of the README's reliability table, measured
// by the fault-injection checks below.
type reliabilityRow struct {
	fault, detect, recovery, lost string
}

func (e *env) reliable(fault string, detect time.Duration, recovery, lost string) {
	d := "-"
	if detect > 0 {
		d = fmt.Sprintf("%.1f s", detect.Seconds())
	}
	e.reliability = append(e.reliability, reliabilityRow{fault, d, recovery, lost})
}

func (e *env) printReliability() {
	if len(e.reliability) == 0 {
		return
	}
	fmt.Print("\n| fault | time to detect | how it recovers | data lost |\n|---|---|---|---|\n")
	for _, r := range e.reliability {
		fmt.Printf("| %s | %s | %s | %s |\n", r.fault, r.detect, r.recovery, r.lost)
	}
}

func (e *env) instDir() string { return filepath.Join(e.home, "default") }

// waitStatus polls `vmdock status` until its output contains want, and
// returns how long that took.
func (e *env) waitStatus(t *testing.T, want string, timeout time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	var out string
	for time.Since(start) < timeout {
		out, _, _ = e.try(10*time.Second, e.vmdock, "status")
		if strings.Contains(out, want) {
			return time.Since(start), out
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("status never said %q within %s; last:\n%s", want, timeout, out)
	return 0, ""
}

// checkBootPanic boots a kernel that panics (its root device does not
// exist and the initramfs is skipped) and checks that start fails naming
// the panic within 10 s of the panic line reaching serial.log, leaving the
// instance Broken and nothing running.
func checkBootPanic(t *testing.T, e *env, startArgs []string) {
	serial := filepath.Join(e.instDir(), "serial.log")
	var base int64
	if st, err := os.Stat(serial); err == nil {
		base = st.Size()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.vmdock, startArgs...)
	cmd.Env = append(e.environ(), "VMDOCK_TEST_KERNEL_APPEND=rdinit=/nonexistent root=/dev/nonexistent")
	cmd.Dir = e.work
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The kernel boots up to its panic: a cold boot, if a short one.
	e.boots.add(false)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var panicAt time.Time
	var err error
wait:
	for {
		select {
		case err = <-exited:
			break wait
		case <-time.After(50 * time.Millisecond):
		}
		if panicAt.IsZero() && fileFrom(serial, base, "Kernel panic - not syncing") {
			panicAt = time.Now()
		}
	}
	done := time.Now()
	if err == nil {
		t.Fatalf("start with a panicking kernel succeeded:\n%s", out.String())
	}
	if panicAt.IsZero() {
		if !fileFrom(serial, base, "Kernel panic - not syncing") {
			t.Fatalf("no panic line in %s; start said:\n%s", serial, out.String())
		}
		panicAt = done // seen only after start returned: within one poll
	}
	msg := out.String()
	if !strings.Contains(msg, "the guest kernel panicked: Kernel panic - not syncing") {
		t.Fatalf("start does not name the panic:\n%s", msg)
	}
	detect := done.Sub(panicAt)
	t.Logf("start failed %.1fs after the panic line appeared", detect.Seconds())
	if detect > 10*time.Second {
		t.Errorf("start failed %s after the panic line: want at most 10 s", detect)
	}
	st, _, _ := e.try(time.Minute, e.vmdock, "status")
	if !strings.Contains(st, "Broken") || !strings.Contains(st, "kernel panicked") {
		t.Errorf("status after the panic:\n%s", st)
	}
	checkNothingLeft(t, e)
	e.reliable("guest kernel panic during boot", detect, "`start` fails naming the panic line; status Broken; the next `start` boots", "none")
}

// fileFrom reports whether path, from offset on, contains s.
func fileFrom(path string, offset int64, s string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, offset, 1<<30))
	return bytes.Contains(b, []byte(s))
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

// checkDiskFullThenQEMUKill fills the data disk from a container, checks
// dockerd reports ENOSPC, then kills QEMU: status must say Broken within
// 5 s, the data disk must pass fsck, two concurrent starts must leave one
// winner, and that start must boot even with the disk full; freeing the
// space makes everything work again.
func checkDiskFullThenQEMUKill(t *testing.T, e *env, startArgs []string) {
	e.timed("data disk filled from a container: dockerd reports ENOSPC", func(t *testing.T) {
		// Data a container wrote and synced before the faults must survive them.
		e.docker(2*time.Minute, "run", "--rm", "-v", "survivor:/m", "vmdock-test:latest", "/bin/busybox", "sh", "-c",
			"dd if=/dev/urandom of=/m/data bs=1M count=8 && sha256sum /m/data > /m/sum && sync")
		e.docker(2*time.Minute, "run", "-d", "--name", "filler", "vmdock-test:latest", "/bin/busybox", "sleep", "100000")
		// fallocate fills without writing, so the host's sparse data.raw
		// does not grow by the disk's size.
		// Chunks of shrinking size: root in the container may also take the
		// blocks ext4 reserves for root, which df does not count as free.
		fill := `n=0; for size in 1G 64M 1M 16k 4k; do while fallocate -l $size /fill$n 2>/dev/null; do n=$((n+1)); done; done; df -k /`
		t.Logf("%s", e.docker(5*time.Minute, "exec", "filler", "/bin/busybox", "sh", "-c", fill))
		_, errOut, err := e.try(2*time.Minute, "docker", "--context", "vmdock", "exec", "filler", "/bin/busybox", "dd", "if=/dev/zero", "of=/more", "bs=1M", "count=64")
		if err == nil || !strings.Contains(strings.ToLower(errOut), "no space left on device") {
			t.Fatalf("writing to a full disk: err %v, stderr %q; want ENOSPC", err, errOut)
		}
		_, errOut, err = e.try(2*time.Minute, "docker", "--context", "vmdock", "run", "--rm", "vmdock-test:latest", "/bin/busybox", "true")
		t.Logf("docker run on a full disk: err %v, %s", err, strings.TrimSpace(errOut))
	})
	e.timed("kill -9 of QEMU: status Broken within 5 s", func(t *testing.T) {
		pid := readPID(t, filepath.Join(e.instDir(), "qemu.pid"))
		if err := syscallKill(pid); err != nil {
			t.Fatal(err)
		}
		detect, out := e.waitStatus(t, "Broken", 30*time.Second)
		t.Logf("status after %.1fs:\n%s", detect.Seconds(), out)
		if !strings.Contains(out, "exited") {
			t.Errorf("status does not say the VM process exited:\n%s", out)
		}
		if detect > 5*time.Second {
			t.Errorf("Broken after %s; want within 5 s", detect)
		}
		checkNothingLeft(t, e)
		e.reliable("kill -9 of QEMU", detect, "status Broken (\"the VM exited unexpectedly\"); `start` boots again", "none (fsck clean)")
	})
	e.timed("data disk passes fsck after the kill", func(t *testing.T) {
		disk := filepath.Join(e.instDir(), "data.raw")
		// Replaying the journal is what the next mount does anyway.
		if out, err := exec.Command("e2fsck", "-y", "-E", "journal_only", disk).CombinedOutput(); err != nil && exitCode(err) > 1 {
			t.Fatalf("journal replay: %v\n%s", err, out)
		}
		out, _ := exec.Command("e2fsck", "-f", "-n", disk).CombinedOutput()
		// Pass 5 finds the free-block and inode totals stale after any
		// unclean stop (ext4 updates them lazily; mount recomputes them):
		// that is bookkeeping, not damage. Passes 1-4 must be silent.
		if problems := structuralProblems(string(out)); len(problems) > 0 {
			t.Fatalf("e2fsck -f -n %s finds damage:\n%s\n\nfull output:\n%s", disk, strings.Join(problems, "\n"), out)
		}
		t.Logf("%s", lastLine(string(out)))
	})
	e.timed("two starts at once: one wins, the other fails at once", func(t *testing.T) {
		type result struct {
			out  string
			err  error
			took time.Duration
		}
		results := make(chan result, 2)
		for i := 0; i < 2; i++ {
			go func() {
				s := time.Now()
				out, errOut, err := e.try(15*time.Minute, e.vmdock, startArgs...)
				results <- result{out + errOut, err, time.Since(s)}
			}()
		}
		a, b := <-results, <-results
		if (a.err == nil) == (b.err == nil) {
			t.Fatalf("want exactly one start to win:\nA (%v, %s): %s\nB (%v, %s): %s", a.err, a.took, a.out, b.err, b.took, b.out)
		}
		loser := a
		if a.err == nil {
			loser = b
		}
		t.Logf("loser after %.1fs: %s", loser.took.Seconds(), strings.TrimSpace(loser.out))
		if loser.took > 5*time.Second || !strings.Contains(loser.out, "pid") {
			t.Errorf("the losing start took %s and said %q; want the lock error naming the holder at once", loser.took, loser.out)
		}
	})
	e.timed("start with a full disk works; freeing it makes docker work again", func(t *testing.T) {
		e.docker(2*time.Minute, "version")
		e.docker(2*time.Minute, "rm", "-f", "filler")
		out := e.docker(3*time.Minute, "run", "--rm", "vmdock-test:latest", "/bin/busybox", "echo", "space-back")
		if strings.TrimSpace(out) != "space-back" {
			t.Fatalf("docker run after freeing the disk: %q", out)
		}
		out = e.docker(2*time.Minute, "run", "--rm", "-v", "survivor:/m", "vmdock-test:latest", "/bin/busybox", "sha256sum", "-c", "/m/sum")
		if !strings.Contains(out, "/m/data: OK") {
			t.Fatalf("data synced before the kill: %q", out)
		}
		e.reliable("data disk filled from a container", 0, "dockerd returns ENOSPC; `vmdock` stops and starts; removing the file restores everything", "none")
	})
}

// checkVirtiofsdKill kills one virtiofsd: the failure must show in status.
// The next cold boot brings the share back (checkVirtiofsBack).
func checkVirtiofsdKill(t *testing.T, e *env) {
	e.timed("kill -9 of virtiofsd shows in status", func(t *testing.T) {
		pids, _ := filepath.Glob(filepath.Join(e.instDir(), "virtiofsd-*.pid"))
		if len(pids) == 0 {
			t.Fatal("no virtiofsd pid file: is a virtiofs share configured?")
		}
		if err := syscallKill(readPID(t, pids[0])); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for {
			out, _, _ := e.try(10*time.Second, e.vmdock, "status", "--json")
			var st struct {
				HostAgent struct {
					Errors []string `json:"errors"`
				} `json:"hostAgent"`
			}
			json.Unmarshal([]byte(out), &st)
			if len(st.HostAgent.Errors) > 0 && strings.Contains(strings.Join(st.HostAgent.Errors, " "), "virtiofsd") {
				t.Logf("after %.1fs: %q", time.Since(start).Seconds(), st.HostAgent.Errors)
				e.reliable("kill -9 of virtiofsd", time.Since(start), "status lists the dead share; `vmdock stop` stops the guest's runtimes, flushes its disks and ends the VM (the share cannot be unmounted); the next cold start (`start`, or `vmdock restart`) brings it back", "none on the host side (writes in flight fail in the guest)")
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("status does not show the dead virtiofsd after 10 s:\n%s", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// checkVirtiofsBack runs after the cold start that followed
// checkVirtiofsdKill's stop: the share works both ways again and status
// lists no dead virtiofsd.
func checkVirtiofsBack(t *testing.T, e *env, shareVFS string) {
	e.timed("the cold start after the virtiofsd kill brings the virtiofs share back", func(t *testing.T) {
		checkBindMount(t, e, shareVFS)
		var st struct {
			HostAgent struct {
				Errors []string `json:"errors"`
			} `json:"hostAgent"`
		}
		out := e.run(time.Minute, e.vmdock, "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		if strings.Contains(strings.Join(st.HostAgent.Errors, " "), "virtiofsd") {
			t.Errorf("status still lists a dead virtiofsd after the cold start: %q", st.HostAgent.Errors)
		}
	})
}

// checkParallelStreams sends 100 parallel 1 MiB streams through a
// published port to the container's TCP echo server and compares the
// sha256 of every stream.
func checkParallelStreams(t *testing.T, e *env) {
	e.docker(3*time.Minute, "run", "-d", "--name", "echo", "-p", "18082:82", "vmdock-test:latest")
	defer e.docker(3*time.Minute, "rm", "-f", "echo")
	e.timed("100 parallel connections x 1 MiB through a forwarded port (direct path)", func(t *testing.T) {
		waitTCPEcho(t, "127.0.0.1:18082", 30*time.Second)
		e.waitPortPath(t, "tcp", 18082, "direct") // the path under test
		const conns, size = 100, 1 << 20
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		for i := 0; i < conns; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- echoStream("127.0.0.1:18082", size, 5*time.Minute)
			}()
		}
		wg.Wait()
		close(errs)
		bad := 0
		for err := range errs {
			if err != nil {
				bad++
				t.Error(err)
			}
		}
		took := time.Since(start)
		t.Logf("%d x %d bytes echoed in %.1fs (%.1f MiB/s each way), %d bad", conns, size, took.Seconds(), float64(conns)/took.Seconds(), bad)
		if bad == 0 {
			e.reliable(fmt.Sprintf("%d parallel connections x 1 MiB through a forwarded port", conns), 0, fmt.Sprintf("all streams echoed intact in %.0f s", took.Seconds()), "0 bytes (sha256 of every stream)")
		}
	})
}

// echoStream writes size random bytes and checks the echo byte for byte.
func echoStream(addr string, size int, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	data := make([]byte, size)
	rand.Read(data)
	want := sha256.Sum256(data)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, c)
	if err != nil {
		return fmt.Errorf("read echo: %w after %d bytes", err, n)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("echo differs: %d bytes back of %d, sha256 match %v", n, size, bytes.Equal(h.Sum(nil), want[:]))
	}
	return nil
}

func waitTCPEcho(t *testing.T, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := echoStream(addr, 16, 10*time.Second)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no TCP echo on %s: %v", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// structuralProblems returns what e2fsck printed inside passes 1 to 4,
// where every line is a real inconsistency.
func structuralProblems(out string) []string {
	var problems []string
	inPass := false
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Pass 5"):
			return problems
		case strings.HasPrefix(l, "Pass "):
			inPass = true
		case inPass && l != "":
			problems = append(problems, l)
		}
	}
	return problems
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
