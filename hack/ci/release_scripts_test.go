//go:build linux

// The release scripts run on GitHub's Ubuntu runners (sha256sum, GNU
// tools): tested on Linux.

package ci

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGh is hack/ci/workflow/fakes (gh, curl) first on PATH, its release
// state in a folder of the test's.
type fakeGh struct {
	t     *testing.T
	state string
	env   []string
}

func newFakeGh(t *testing.T) *fakeGh {
	t.Helper()
	need(t, "bash")
	state := t.TempDir()
	fakes := filepath.Join(repoRoot(t), "hack", "ci", "workflow", "fakes")
	env := append(os.Environ(), "PATH="+fakes+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FAKE_GH_STATE="+state, "GH_TOKEN=fake", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	return &fakeGh{t: t, state: state, env: env}
}

// release sets the fake release: "" none, "true" a draft, "false" published.
func (g *fakeGh) release(draft string, assets map[string]string) {
	g.t.Helper()
	p := filepath.Join(g.state, "isDraft")
	os.Remove(p)
	if draft != "" {
		if err := os.WriteFile(p, []byte(draft+"\n"), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(g.state, "assets"), 0o755); err != nil {
		g.t.Fatal(err)
	}
	for name, body := range assets {
		if err := os.WriteFile(filepath.Join(g.state, "assets", name), []byte(body), 0o644); err != nil {
			g.t.Fatal(err)
		}
	}
}

func (g *fakeGh) run(dir string, args ...string) (string, error) {
	cmd := exec.Command("bash", args...)
	cmd.Dir, cmd.Env = dir, g.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (g *fakeGh) calls() string {
	b, _ := os.ReadFile(filepath.Join(g.state, "calls"))
	return string(b)
}

// TestPublishReleaseReusesADraft: no release makes a draft; a draft (a
// failed run's) gets its files replaced; a published release is refused.
func TestPublishReleaseReusesADraft(t *testing.T) {
	g := newFakeGh(t)
	dir := t.TempDir()
	for _, f := range []string{"images.json", "vmdock-amd64.tar.zst", "vmdock-arm64.tar.zst", "vmdock-darwin-arm64",
		"vmdock-darwin-amd64", "vmdock-linux-amd64", "vmdock-linux-arm64"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(repoRoot(t), "hack", "ci", "publish-release.sh")
	for _, tc := range []struct{ before, call, after string }{
		{"", "gh release create v1.2.3 --draft", "true"},
		{"true", "gh release upload v1.2.3 --clobber", "true"},
		{"false", "", "false"},
	} {
		g.release(tc.before, nil)
		os.Remove(filepath.Join(g.state, "calls"))
		out, err := g.run(dir, script, dir, "v1.2.3")
		if (tc.call == "") != (err != nil) {
			t.Errorf("release before %q: err %v\n%s", tc.before, err, out)
		}
		if tc.call != "" && !strings.Contains(g.calls(), tc.call) {
			t.Errorf("release before %q: gh calls %q, want %q", tc.before, g.calls(), tc.call)
		}
		if tc.call == "" && strings.Contains(g.calls(), "upload") {
			t.Errorf("a published release was changed: %s", g.calls())
		}
		if b, _ := os.ReadFile(filepath.Join(g.state, "isDraft")); strings.TrimSpace(string(b)) != tc.after {
			t.Errorf("release before %q: isDraft %q after, want %q", tc.before, b, tc.after)
		}
	}
	if _, err := os.Stat(filepath.Join(g.state, "assets", "SHA256SUMS")); err != nil {
		t.Error("no SHA256SUMS attached")
	}
}

// TestCommitFormulaOnlyForAPublishedRelease: a draft is refused with
// nothing pushed; a published release's images.json digest is what the
// pushed formula pins.
func TestCommitFormulaOnlyForAPublishedRelease(t *testing.T) {
	need(t, "git")
	g := newFakeGh(t)
	root, tmp := repoRoot(t), t.TempDir()
	g.env = append(g.env, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@localhost")
	work, origin := filepath.Join(tmp, "work"), filepath.Join(tmp, "origin.git")
	for _, f := range []string{"Formula/vmdock.rb", "hack/ci/commit-formula.sh", "hack/ci/update-formula.sh", "hack/ci/check-tag.sh"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git := func(dir string, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, g.env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git(tmp, "init", "-q", "--bare", "-b", "main", origin)
	git(work, "init", "-q", "-b", "main")
	git(work, "add", ".")
	git(work, "commit", "-q", "-m", "start")
	git(work, "remote", "add", "origin", origin)
	git(work, "push", "-q", "origin", "main")

	manifest := `{"imageFormat":1}`
	g.release("true", map[string]string{"images.json": manifest})
	if out, err := g.run(work, "hack/ci/commit-formula.sh", "acme/vmdock", "v1.2.3", "main"); err == nil || !strings.Contains(out, "is a draft") {
		t.Fatalf("a draft: err %v, want it refused\n%s", err, out)
	}
	if msg := git(origin, "log", "-1", "--format=%s", "main"); msg != "start" {
		t.Fatalf("a draft pushed %q", msg)
	}
	g.release("false", nil)
	if out, err := g.run(work, "hack/ci/commit-formula.sh", "acme/vmdock", "v1.2.3", "main"); err != nil {
		t.Fatalf("a published release: %v\n%s", err, out)
	}
	formula := git(origin, "show", "main:Formula/vmdock.rb")
	for _, want := range []string{`"` + sha([]byte(manifest)) + `"`, `url "https://github.com/acme/vmdock/archive/refs/tags/v1.2.3.tar.gz"`,
		`sha256 "` + sha([]byte("fake tarball of https://github.com/acme/vmdock/archive/refs/tags/v1.2.3.tar.gz\n")) + `"`} {
		if !strings.Contains(formula, want) {
			t.Errorf("the pushed formula lacks %s:\n%s", want, formula)
		}
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
