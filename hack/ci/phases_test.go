//go:build linux

// .ci/run runs on Linux only: phases.sh needs setsid, cgroups and bash 4's
// associative arrays, none of which a Mac has.

package ci

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPhaseTable runs .ci/run's phase bookkeeping (hack/ci/phases.sh) on
// phases that take a moment: a foreground and a background phase that
// print an e2e test's boots line, one that prints none, and one that
// fails. The table ends the run, fails it, and gives each row its seconds
// and boots.
func TestPhaseTable(t *testing.T) {
	need(t, "setsid")
	logs := t.TempDir()
	// The busy phase spends CPU in a process that left the phase's
	// session, until its own cgroup's counter shows 1.5 s of CPU spent:
	// on a loaded machine that takes longer, but the amount is the same,
	// and it is what the row must show. Without a cgroup to read, it
	// stops at once (the row is not checked then).
	busy := filepath.Join(t.TempDir(), "busy.sh")
	if err := os.WriteFile(busy, []byte(busyUntilCPUSpent), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `set -euo pipefail
logs=` + logs + `
ci_start=$(date +%s)
source ` + filepath.Join(repoRoot(t), "hack", "ci", "phases.sh") + `
trap print_timings EXIT
phase quiet true
phase busy bash -c 'setsid bash ` + busy + ` & wait'
phase e2e bash -c 'echo "=== RUN   TestE2E"; printf "\ne2e boots: cold=1 resumed=9\n"; printf "\ne2e boots: cold=6 resumed=0\n"'
background bg bash -c 'echo "e2e boots: cold=1 resumed=2"'
await bg
phase broken bash -c 'echo "    x_test.go:12: the reason it failed"; for i in $(seq 300); do echo filler; done; echo "e2e boots: cold=3 resumed=0"; exit 3'
phase never true
`
	cmd := exec.Command("bash", "-c", script)
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 3 {
		t.Fatalf("a run whose phase exits 3: %v, want exit status 3\n%s", err, out)
	}
	table := string(out)
	if i := strings.LastIndex(table, "\nphase "); i >= 0 {
		table = table[i+1:]
	}
	for _, row := range []string{
		`phase +seconds cpu-seconds boots \(cold/resumed\)`,
		`quiet +\d+ +(\d+|-) -`,
		`e2e +\d+ +(\d+|-) 6/0`,
		`bg +\d+ +(\d+|-) 1/2`,
		`broken +FAILED after \d+ +(\d+|-) 3/0`,
		`total +\d+ +\d+`,
	} {
		if !regexp.MustCompile(`(?m)^` + row + `$`).MatchString(table) {
			t.Errorf("the table has no row %q:\n%s", row, table)
		}
	}
	// A phase's CPU-seconds count a process that left its session, as
	// the host agents do; where cgroups can be made (root, cgroup2).
	if cgroupsWritable() {
		if m := regexp.MustCompile(`(?m)^busy +\d+ +(\d+) -$`).FindStringSubmatch(table); m == nil || m[1] == "0" || m[1] == "1" {
			t.Errorf("the busy phase (1.5 s of CPU spent in a process of its own session) shows less than 2 CPU-seconds:\n%s", table)
		}
	}
	// the failed phase's test message comes again just before the table
	if i := strings.LastIndex(string(out), "x_test.go:12: the reason it failed"); i < 0 || strings.Contains(string(out)[i:], "filler") {
		t.Errorf("the failed phase's test message is not repeated after its log:\n%s", out[max(0, len(out)-600):])
	}
	if strings.Contains(table, "never") {
		t.Errorf("a phase after the failed one ran:\n%s", table)
	}
	if b, err := os.ReadFile(filepath.Join(logs, "e2e.log")); err != nil || !strings.Contains(string(b), "=== RUN   TestE2E") {
		t.Errorf("a foreground phase's log: %q, %v; want its output", b, err)
	}
}

// busyUntilCPUSpent spins until the cgroup it runs in has used 1.5 s of
// CPU (its usage_usec, which the phase's row reads too), or 120 s went by
// (a machine that cannot give it that; the row then shows it), or there
// is no cgroup2 counter to read.
const busyUntilCPUSpent = `stat=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)/cpu.stat
end=$((SECONDS + 120))
while [ $SECONDS -lt $end ]; do
  used=$(awk '$1 == "usage_usec" {print $2}' "$stat" 2>/dev/null) || break
  [ "${used:-0}" -lt 1500000 ] || break
  for i in $(seq 2000); do :; done
done
`

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// cgroupsWritable says whether this process may make a cgroup in the
// unified hierarchy, as phases.sh does for each phase.
func cgroupsWritable() bool {
	mounts, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] == "cgroup2" {
			dir, err := os.MkdirTemp(f[1], "vmdock-ci-probe-")
			if err != nil {
				return false
			}
			os.Remove(dir)
			return true
		}
	}
	return false
}
