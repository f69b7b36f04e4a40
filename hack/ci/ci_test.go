package ci

import (
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
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// need finds a tool the test runs. Under CI=true (where hack/deps.sh has
// installed it) a missing tool fails the test; elsewhere it skips.
func need(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (hack/deps.sh installs it): %v", tool, err)
		}
		t.Skipf("%s not installed: %v", tool, err)
	}
	return p
}

// formulaTest runs hack/ci/formula_test.rb on formula.
func formulaTest(t *testing.T, formula string) (string, error) {
	t.Helper()
	ruby := need(t, "ruby")
	cmd := exec.Command(ruby, filepath.Join(repoRoot(t), "hack", "ci", "formula_test.rb"), formula)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestFormula(t *testing.T) {
	out, err := formulaTest(t, filepath.Join(repoRoot(t), "Formula", "vmdock.rb"))
	if err != nil {
		t.Fatalf("Formula/vmdock.rb: %v\n%s", err, out)
	}
	t.Log(out)
}

// TestFormulaTestFails proves the Ruby test catches each thing it checks:
// a formula with one of them broken fails, naming it.
func TestFormulaTestFails(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(repoRoot(t), "Formula", "vmdock.rb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ old, new, failure string }{
		{`depends_on "go" => :build`, `depends_on "go"`, `depends_on "go" => :build`},
		{`depends_on macos: :ventura`, `depends_on macos: :monterey`, "depends_on macos: :ventura"},
		{`depends_on arch: :arm64`, ``, "depends_on arch: :arm64"},
		{`license "Apache-2.0"`, `license "MIT"`, `license "Apache-2.0"`},
		{`/archive/refs/tags/v0.0.0.tar.gz`, `/archive/refs/heads/main.tar.gz`, "url is a GitHub tag's source tarball"},
		{`sha256 "` + strings.Repeat("0", 64) + `"`, `sha256 "abc"`, "sha256 is 64 hex digits"},
		{`args << "VERSION=v#{version}"`, ``, "make gets VERSION=v0.0.0"},
		{`args << "IMAGE_BASE_URL=#{homepage}/releases/download/v#{version}/"`, `args << "IMAGE_BASE_URL="`, "make gets IMAGE_BASE_URL="},
		{`generate_completions_from_executable(`, `puts(`, "completions from `vmdock completion`"},
		{`shells: [:bash, :zsh, :fish]`, `shells: [:bash]`, "completions for bash, zsh and fish"},
	} {
		if !strings.Contains(string(good), tc.old) {
			t.Fatalf("Formula/vmdock.rb has no %q to break", tc.old)
		}
		bad := filepath.Join(t.TempDir(), "vmdock.rb")
		if err := os.WriteFile(bad, []byte(strings.Replace(string(good), tc.old, tc.new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := formulaTest(t, bad)
		if err == nil || !strings.Contains(out, "FAIL "+tc.failure) {
			t.Errorf("%q -> %q: err %v, want the failure %q:\n%s", tc.old, tc.new, err, tc.failure, out)
		}
	}
}

func TestUpdateFormula(t *testing.T) {
	bash := need(t, "bash")
	root := repoRoot(t)
	good, err := os.ReadFile(filepath.Join(root, "Formula", "vmdock.rb"))
	if err != nil {
		t.Fatal(err)
	}
	formula := filepath.Join(t.TempDir(), "vmdock.rb")
	if err := os.WriteFile(formula, good, 0o644); err != nil {
		t.Fatal(err)
	}
	tarball, manifest := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	update := func(args ...string) (string, error) {
		cmd := exec.Command(bash, append([]string{filepath.Join(root, "hack", "ci", "update-formula.sh"), formula}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := update("acme/vmdock", "v9.9.9", tarball, manifest); err != nil {
		t.Fatalf("update-formula.sh: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(formula)
	got := string(b)
	for _, want := range []string{
		`  homepage "https://github.com/acme/vmdock"`,
		`  url "https://github.com/acme/vmdock/archive/refs/tags/v9.9.9.tar.gz"`,
		`  sha256 "` + tarball + `"`,
		`  head "https://github.com/acme/vmdock.git", branch: "main"`,
		`    "` + manifest + `"`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("updated formula lacks the line %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "github.com/vmdock/vmdock") || strings.Count(got, strings.Repeat("0", 64)) != 0 {
		t.Errorf("updated formula still names the placeholder:\n%s", got)
	}
	if out, err := formulaTest(t, formula); err != nil || !strings.Contains(out, "IMAGE_BASE_URL=https://github.com/acme/vmdock/releases/download/v9.9.9/") {
		t.Errorf("the updated formula fails its test: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"acme", "v9.9.9", tarball, manifest},
		{"acme/vmdock", "9.9.9", tarball, manifest},
		{"acme/vmdock", "v9.9.9", "xyz", manifest},
		{"acme/vmdock", "v9.9.9", tarball, strings.ToUpper(manifest)},
		{"acme/vmdock", "v9.9.9; rm -rf /", tarball, manifest},
	} {
		if out, err := update(args...); err == nil {
			t.Errorf("update-formula.sh %q accepted:\n%s", args, out)
		}
	}
	if after, _ := os.ReadFile(formula); string(after) != got {
		t.Error("a refused update changed the formula")
	}
}
