//go:build linux

package workflow

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// needRoot: hiding /usr/local/go takes a mount namespace of its own.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("hack/ci/workflow hides /usr/local/go in a mount namespace: run as root (.ci/run does)")
		}
		t.Skip("needs root (a mount namespace hides /usr/local/go)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
}

// runWorkflow writes yml and runs its jobs in order, in place in a
// scratch folder; it returns the log and the first error.
func runWorkflow(t *testing.T, yml string, jobs ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "wf.yml")
	if err := os.WriteFile(p, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r := &Runner{Repo: ws, InPlace: true, Artifacts: filepath.Join(dir, "artifacts"), Temp: dir,
		FakeBin: filepath.Join(repoRoot(t), "hack", "ci", "workflow", "fakes"), GoRoot: "/usr/local/go",
		GitHub: LocalGitHub("v1.2.3"), Log: &log}
	for _, id := range jobs {
		for _, m := range LinuxEntries(f.Jobs[id]) {
			if err := r.RunJob(f, id, m); err != nil {
				return log.String(), err
			}
		}
	}
	return log.String(), nil
}

// A job has Go only when it sets Go up: not on PATH, and not in
// /usr/local/go either (where this machine has it).
func TestGoOnlyWithSetupGo(t *testing.T) {
	needRoot(t)
	if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
		t.Skip("no /usr/local/go here to hide")
	}
	without := `
jobs:
  build:
    runs-on: ubuntu-24.04
    container: {image: "debian:bookworm"}
    steps:
      - run: /usr/local/go/bin/go version
`
	out, err := runWorkflow(t, without, "build")
	if err == nil {
		t.Fatalf("a job without setup-go ran /usr/local/go/bin/go:\n%s", out)
	}
	with := strings.Replace(without, "      - run:", "      - uses: actions/setup-go@v6\n      - run: go version\n      - run:", 1)
	if out, err := runWorkflow(t, with, "build"); err != nil || !strings.Contains(out, "go version go1.") {
		t.Fatalf("a job with setup-go: %v\n%s", err, out)
	}
}

// Nothing of the caller's environment reaches a step but HOME; the
// workflow's, job's and step's env and the matrix do, expanded.
func TestCleanEnvironment(t *testing.T) {
	needRoot(t)
	t.Setenv("VMDOCK_WORKFLOW_LEAK", "leaked")
	yml := `
env:
  TOP: top-${{ github.ref_name }}
jobs:
  build:
    strategy:
      matrix:
        include:
          - {arch: amd64, runner: ubuntu-24.04}
          - {arch: arm64, runner: macos-15}
    runs-on: ${{ matrix.runner }}
    env:
      JOB: job-${{ matrix.arch }}
    steps:
      - run: |
          test -z "${VMDOCK_WORKFLOW_LEAK:-}"
          test "$TOP $JOB $STEP" = "top-v1.2.3 job-amd64 step-amd64"
          test "$PATH" = "` + filepath.Join(repoRoot(t), "hack", "ci", "workflow", "fakes") + ":" + basePath + `"
          echo "ran ${{ matrix.arch }}"
        env:
          STEP: step-${{ matrix.arch }}
`
	out, err := runWorkflow(t, yml, "build")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "ran amd64") || strings.Contains(out, "ran arm64") {
		t.Errorf("want the Ubuntu entry only:\n%s", out)
	}
}

// Outputs flow from a step to its job to the jobs that need it;
// artifacts from one job to the next; gh is the fake on an Ubuntu runner
// and absent in a container.
func TestOutputsArtifactsAndGh(t *testing.T) {
	needRoot(t)
	yml := `
jobs:
  one:
    runs-on: ubuntu-24.04
    container: {image: "debian:bookworm"}
    outputs:
      sum: ${{ steps.s.outputs.sum }}
    steps:
      - run: "! command -v gh"
      - id: s
        run: mkdir -p dist && echo hi > dist/a.txt && echo "sum=abc" >> "$GITHUB_OUTPUT"
      - uses: actions/upload-artifact@v7
        with: {name: art-one, path: dist/a.txt}
  two:
    needs: one
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/download-artifact@v8
        with: {pattern: art-*, path: got, merge-multiple: true}
      - run: |
          test "$(cat got/a.txt)" = hi
          test "${{ needs.one.outputs.sum }}" = abc
          command -v gh
`
	if out, err := runWorkflow(t, yml, "one", "two"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// What the runner does not model fails, naming it, instead of passing
// unchecked.
func TestUnmodelledFails(t *testing.T) {
	needRoot(t)
	for _, step := range []string{
		"      - run: echo ${{ secrets.TOKEN }}",
		"      - uses: some/action@v1",
		"      - run: echo ${{ github.sha }}",
		"      - if: success()\n        run: true",
	} {
		yml := "jobs:\n  j:\n    runs-on: ubuntu-24.04\n    steps:\n" + step + "\n"
		if out, err := runWorkflow(t, yml, "j"); err == nil || !strings.Contains(err.Error(), "not modelled") {
			t.Errorf("%s: err %v, want 'not modelled'\n%s", step, err, out)
		}
	}
}
