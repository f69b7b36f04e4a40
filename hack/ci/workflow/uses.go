package workflow

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// uses runs the actions the workflows use, as far as they matter here.
func (jb *job) uses(action string, with map[string]string) error {
	name, _, _ := strings.Cut(action, "@")
	fmt.Fprintf(jb.r.Log, "-- uses: %s\n", action)
	switch name {
	case "actions/checkout":
		return jb.checkout()
	case "actions/setup-go":
		// The toolchain container-setup.sh and the Makefile expect, and
		// the caches a runner would restore.
		jb.path = append([]string{filepath.Join(jb.r.GoRoot, "bin")}, jb.path...)
		jb.goSetUp = true
		for _, k := range goCacheVars {
			if v, ok := os.LookupEnv(k); ok {
				jb.env[k] = v
			}
		}
		return nil
	case "actions/upload-artifact":
		return jb.upload(with)
	case "actions/download-artifact":
		return jb.download(with)
	}
	return fmt.Errorf("uses: %s: not modelled by hack/ci/workflow", action)
}

// checkout gives the job the repository: Repo itself when in place, else
// a clone of Repo's HEAD with its uncommitted changes, whose origin is a
// bare repository under Temp (so a job's push lands there, never on a
// real remote).
func (jb *job) checkout() error {
	if jb.r.InPlace {
		return nil
	}
	origin := filepath.Join(jb.r.Temp, "origin.git")
	if _, err := os.Stat(origin); err != nil {
		rev := strings.TrimSpace(gitOut(jb.r.Repo, "stash", "create"))
		if rev == "" {
			rev = "HEAD"
		}
		if _, err := git(jb.r.Repo, "init", "-q", "--bare", "-b", "main", origin); err != nil {
			return err
		}
		if _, err := git(jb.r.Repo, "push", "-q", origin, rev+":refs/heads/main"); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(jb.workspace); err != nil {
		return err
	}
	_, err := git(jb.r.Repo, "clone", "-q", origin, jb.workspace)
	return err
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	// `stash create` makes a commit: it needs a name, which a CI
	// container's git may not have.
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GIT_AUTHOR_NAME=wfrun", "GIT_AUTHOR_EMAIL=wfrun@localhost",
		"GIT_COMMITTER_NAME=wfrun", "GIT_COMMITTER_EMAIL=wfrun@localhost")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func gitOut(dir string, args ...string) string {
	out, _ := git(dir, args...)
	return out
}

// upload copies (hard links where it can) the files `path` names, one
// glob a line relative to the workspace, into the artifact.
func (jb *job) upload(with map[string]string) error {
	dst := filepath.Join(jb.r.Artifacts, with["name"])
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	n := 0
	for _, pat := range strings.Split(with["path"], "\n") {
		if pat = strings.TrimSpace(pat); pat == "" {
			continue
		}
		if !filepath.IsAbs(pat) {
			pat = filepath.Join(jb.workspace, pat)
		}
		matches, _ := filepath.Glob(pat)
		for _, m := range matches {
			if err := linkOrCopy(m, filepath.Join(dst, filepath.Base(m))); err != nil {
				return err
			}
			n++
		}
	}
	if n == 0 && with["if-no-files-found"] != "ignore" {
		return fmt.Errorf("upload-artifact %s: no files match %q", with["name"], with["path"])
	}
	return nil
}

// download copies the artifact `name`, or every artifact `pattern`
// matches (merged into path with merge-multiple, else one folder each).
func (jb *job) download(with map[string]string) error {
	path := with["path"]
	if path == "" {
		path = "."
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(jb.workspace, path)
	}
	pattern, merge := with["pattern"], with["merge-multiple"] == "true"
	if with["name"] != "" {
		pattern, merge = with["name"], true
	} else if pattern == "" {
		pattern = "*"
	}
	names, _ := filepath.Glob(filepath.Join(jb.r.Artifacts, pattern))
	if len(names) == 0 {
		return fmt.Errorf("download-artifact: no artifact matches %q", pattern)
	}
	for _, a := range names {
		dst := path
		if !merge {
			dst = filepath.Join(path, filepath.Base(a))
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		files, _ := filepath.Glob(filepath.Join(a, "*"))
		for _, f := range files {
			if err := linkOrCopy(f, filepath.Join(dst, filepath.Base(f))); err != nil {
				return err
			}
		}
	}
	return nil
}

func linkOrCopy(src, dst string) error {
	_ = os.Remove(dst)
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
