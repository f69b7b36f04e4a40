package ci

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo runs git in dir with no user or system config of this machine's.
type gitRepo struct {
	t   *testing.T
	dir string
	env []string
}

func (g gitRepo) run(args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = g.dir, g.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// printImageBaseURL is `make print-image-base-url` in dir, extra make
// arguments after.
func (g gitRepo) printImageBaseURL(extra ...string) string {
	g.t.Helper()
	cmd := exec.Command("make", append([]string{"-s", "print-image-base-url"}, extra...)...)
	cmd.Dir, cmd.Env = g.dir, g.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("make print-image-base-url: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestSourceBuildFindsItsRelease clones a repository holding this
// checkout's Makefile and hack/release/base-url.sh, tagged v9.9.9, sets
// its origin to a GitHub repository, and asks make what a build there
// embeds as its image base URL.
func TestSourceBuildFindsItsRelease(t *testing.T) {
	need(t, "git")
	need(t, "make")
	root := repoRoot(t)
	tmp := t.TempDir()
	// IMAGE_BASE_URL, even empty, set in the environment is a value make
	// keeps (?=): the test's make must not inherit one.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IMAGE_BASE_URL=") && !strings.HasPrefix(kv, "MAKEFLAGS=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+tmp, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	)
	src := gitRepo{t, filepath.Join(tmp, "src"), env}
	for _, f := range []string{"Makefile", filepath.Join("hack", "release", "base-url.sh")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src.dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src.dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src.run("init", "-q", "-b", "main")
	src.run("add", ".")
	src.run("commit", "-q", "-m", "release")
	src.run("tag", "v9.9.9")

	clone := gitRepo{t, filepath.Join(tmp, "clone"), env}
	src.run("clone", "-q", src.dir, clone.dir)
	for _, origin := range []string{
		"https://github.com/acme/vmdock.git",
		"https://github.com/acme/vmdock",
		"git@github.com:acme/vmdock.git",
		"ssh://git@github.com/acme/vmdock.git",
	} {
		clone.run("remote", "set-url", "origin", origin)
		if got, want := clone.printImageBaseURL(), "https://github.com/acme/vmdock/releases/download/v9.9.9/"; got != want {
			t.Errorf("origin %s at v9.9.9: %q, want %q", origin, got, want)
		}
	}
	if got := clone.printImageBaseURL("IMAGE_BASE_URL=https://mirror.example/v1/"); got != "https://mirror.example/v1/" {
		t.Errorf("IMAGE_BASE_URL given: %q, want it kept", got)
	}

	clone.run("remote", "set-url", "origin", "https://gitlab.com/acme/vmdock.git")
	if got := clone.printImageBaseURL(); got != "" {
		t.Errorf("origin on gitlab.com: %q, want empty", got)
	}
	clone.run("remote", "set-url", "origin", "https://github.com/acme/vmdock.git")
	clone.run("commit", "-q", "--allow-empty", "-m", "after the tag")
	if got := clone.printImageBaseURL(); got != "" {
		t.Errorf("HEAD one commit past v9.9.9: %q, want empty", got)
	}
	clone.run("checkout", "-q", "v9.9.9")
	clone.run("remote", "remove", "origin")
	if got := clone.printImageBaseURL(); got != "" {
		t.Errorf("no origin: %q, want empty", got)
	}
}
