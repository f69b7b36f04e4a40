//go:build linux

package ci

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/hack/ci/workflow"
	"github.com/vmdock/vmdock/images/imagetest"
)

// releaseRun is the release workflows' Linux jobs run here by
// hack/ci/workflow, each in a fresh clone of this checkout whose origin is
// a scratch bare repository, gh and curl faked.
type releaseRun struct {
	t       *testing.T
	r       *workflow.Runner
	log     *bytes.Buffer
	release *workflow.File
	formula *workflow.File
}

func newReleaseRun(t *testing.T, tag string) *releaseRun {
	t.Helper()
	root := repoRoot(t)
	tmp := t.TempDir()
	var log bytes.Buffer
	rr := &releaseRun{t: t, log: &log}
	rr.r = &workflow.Runner{Repo: root, Artifacts: filepath.Join(tmp, "artifacts"), Temp: tmp,
		FakeBin: filepath.Join(root, "hack", "ci", "workflow", "fakes"), GoRoot: "/usr/local/go",
		GitHub: workflow.LocalGitHub(tag), Log: &log}
	var err error
	if rr.release, err = workflow.Load(filepath.Join(root, ".github", "workflows", "release.yml")); err != nil {
		t.Fatal(err)
	}
	if rr.formula, err = workflow.Load(filepath.Join(root, ".github", "workflows", "formula.yml")); err != nil {
		t.Fatal(err)
	}
	return rr
}

// seed puts files in the artifact name, as a job this machine does not
// run (an image build and boot, a Mac's build) would have uploaded them.
func (rr *releaseRun) seed(name string, files map[string][]byte) {
	dir := filepath.Join(rr.r.Artifacts, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		rr.t.Fatal(err)
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o755); err != nil {
			rr.t.Fatal(err)
		}
	}
}

// run runs the jobs' Ubuntu matrix entries in order.
func (rr *releaseRun) run(f *workflow.File, jobs ...string) error {
	for _, id := range jobs {
		for _, m := range workflow.LinuxEntries(f.Jobs[id]) {
			if err := rr.r.RunJob(f, id, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (rr *releaseRun) mustRun(f *workflow.File, jobs ...string) {
	rr.t.Helper()
	if err := rr.run(f, jobs...); err != nil {
		rr.t.Fatalf("%v\n%s", err, rr.tail())
	}
}

func (rr *releaseRun) tail() string {
	s := rr.log.String()
	if len(s) > 6000 {
		s = "…" + s[len(s)-6000:]
	}
	return s
}

func (rr *releaseRun) ghState(name string) string {
	b, _ := os.ReadFile(filepath.Join(rr.r.Temp, "fake-gh", name))
	return strings.TrimSpace(string(b))
}

func tinyImage(t *testing.T, arch string) []byte {
	t.Helper()
	ms := imagetest.Members(arch, nil)
	manifest := ms[0]
	manifest.Name = "manifest.json"
	b, err := imagetest.Encode(append(ms[1:], manifest))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReleaseWorkflowsRun runs release.yml's Linux jobs after the image
// builds (tiny images stand in for them: building and booting images is
// .ci/run's image phase and the e2e phases) and formula.yml's, with gh and
// curl faked: a tag makes a draft release whose binaries embed the pin of
// its images.json, a second run reuses the draft, the formula job refuses
// the draft, and once it is published points the formula at it.
func TestReleaseWorkflowsRun(t *testing.T) {
	if os.Getenv("VMDOCK_CI_WORKFLOWS") != "1" {
		t.Skip("set VMDOCK_CI_WORKFLOWS=1 (.ci/run's workflows phase): it builds the Linux release binaries in a clone")
	}
	need(t, "git")
	need(t, "make")
	rr := newReleaseRun(t, "v9.9.9")
	rr.seed("image-amd64", map[string][]byte{"vmdock-amd64.tar.zst": tinyImage(t, "amd64")})
	rr.seed("image-arm64", map[string][]byte{"vmdock-arm64.tar.zst": tinyImage(t, "arm64")})
	rr.seed("binaries-darwin", map[string][]byte{"vmdock-darwin-amd64": []byte("mac"), "vmdock-darwin-arm64": []byte("mac")})
	rr.mustRun(rr.release, "tag", "manifest", "binaries", "release")

	manifest, err := os.ReadFile(filepath.Join(rr.r.Temp, "fake-gh", "assets", "images.json"))
	if err != nil {
		t.Fatalf("the draft has no images.json: %v\n%s", err, rr.tail())
	}
	pin := sha(manifest)
	if rr.ghState("isDraft") != "true" {
		t.Errorf("the release is not a draft: %q", rr.ghState("isDraft"))
	}
	version, err := exec.Command(filepath.Join(rr.r.Temp, "fake-gh", "assets", "vmdock-linux-amd64"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(version), "manifest: sha256:"+pin) ||
		!strings.Contains(string(version), "https://github.com/vmdock/vmdock/releases/download/v9.9.9/") {
		t.Errorf("the released binary's version: %v\n%s\nwant the pin %s and the release's URL", err, version, pin)
	}
	for _, f := range []string{"SHA256SUMS", "vmdock-linux-arm64", "vmdock-darwin-amd64", "vmdock-amd64.tar.zst"} {
		if _, err := os.Stat(filepath.Join(rr.r.Temp, "fake-gh", "assets", f)); err != nil {
			t.Errorf("the draft lacks %s", f)
		}
	}

	// A failed release run again: the draft is reused, its files replaced.
	rr.mustRun(rr.release, "release")
	if calls := rr.ghState("calls"); !strings.Contains(calls, "gh release upload v9.9.9 --clobber") {
		t.Errorf("the second run did not replace the draft's files; gh calls:\n%s", calls)
	}

	// The formula never points at a draft.
	if err := rr.run(rr.formula, "formula"); err == nil || !strings.Contains(rr.log.String(), "is a draft") {
		t.Fatalf("formula job on a draft: %v, want it refused\n%s", err, rr.tail())
	}
	if err := os.WriteFile(filepath.Join(rr.r.Temp, "fake-gh", "isDraft"), []byte("false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rr.mustRun(rr.formula, "formula")
	checkPushedFormula(t, rr, pin)
}

// checkPushedFormula: the scratch origin's main has the formula commit,
// pointing at the tag's tarball and pinning the published images.json.
func checkPushedFormula(t *testing.T, rr *releaseRun, pin string) {
	t.Helper()
	origin := filepath.Join(rr.r.Temp, "origin.git")
	msg, err := exec.Command("git", "-C", origin, "log", "-1", "--format=%s", "main").Output()
	if err != nil || strings.TrimSpace(string(msg)) != "Formula: vmdock v9.9.9" {
		t.Fatalf("origin's main: %q, %v; want the formula commit\n%s", msg, err, rr.tail())
	}
	formula, err := exec.Command("git", "-C", origin, "show", "main:Formula/vmdock.rb").Output()
	if err != nil {
		t.Fatal(err)
	}
	tarball := sha([]byte("fake tarball of https://github.com/vmdock/vmdock/archive/refs/tags/v9.9.9.tar.gz\n"))
	for _, want := range []string{`url "https://github.com/vmdock/vmdock/archive/refs/tags/v9.9.9.tar.gz"`,
		`sha256 "` + tarball + `"`, `"` + pin + `"`} {
		if !strings.Contains(string(formula), want) {
			t.Errorf("the pushed formula lacks %s:\n%s", want, formula)
		}
	}
}

// TestEveryLinuxJobIsRunHere: each job of every workflow that runs on an
// Ubuntu runner is run by .ci/run through hack/ci/workflow, or says here
// why not; a new Linux job must be placed.
func TestEveryLinuxJobIsRunHere(t *testing.T) {
	runHere := map[string]string{
		"ci.yml/linux-image":   ".ci/run's image phase (hack/ci/wfrun)",
		"release.yml/tag":      "TestReleaseWorkflowsRun",
		"release.yml/manifest": "TestReleaseWorkflowsRun",
		"release.yml/binaries": "TestReleaseWorkflowsRun (its Linux entry)",
		"release.yml/release":  "TestReleaseWorkflowsRun",
		"formula.yml/formula":  "TestReleaseWorkflowsRun",
		"ci.yml/linux":         "not run: it is .ci/run itself",
		"release.yml/image":    "not run: ci.yml linux-image's steps, plus the smoke boot (a VM boot .ci/run does not add)",
	}
	dir := filepath.Join(repoRoot(t), ".github", "workflows")
	files, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows in %s: %v", dir, err)
	}
	for _, p := range files {
		f, err := workflow.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range f.JobIDs() {
			key := filepath.Base(p) + "/" + id
			if len(workflow.LinuxEntries(f.Jobs[id])) > 0 && runHere[key] == "" {
				t.Errorf("%s runs on Linux but neither .ci/run runs it nor does this test say why not", key)
			}
		}
	}
}
