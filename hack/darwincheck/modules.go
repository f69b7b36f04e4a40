package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode"
)

// modFile is the part of go.mod the resolver needs. Since Go 1.17 the main
// go.mod lists every module that provides a package to the build, so the
// require lines are the build list.
type modFile struct {
	Path     string
	Requires map[string]string // module path -> version
	Replaces map[string]string // module path -> local dir or "path@version" in the cache
}

func parseGoMod(dir string) (*modFile, error) {
	name := filepath.Join(dir, "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	mf := &modFile{Requires: map[string]string{}, Replaces: map[string]string{}}
	block := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if block != "" {
			if f[0] == ")" {
				block = ""
				continue
			}
			f = append([]string{block}, f...)
		} else if len(f) == 2 && f[1] == "(" {
			block = f[0]
			continue
		}
		switch f[0] {
		case "module":
			if len(f) == 2 {
				mf.Path = strings.Trim(f[1], `"`)
			}
		case "require":
			if len(f) == 3 {
				mf.Requires[f[1]] = f[2]
			}
		case "replace":
			// old [v] => new [v]
			i := indexOf(f, "=>")
			if i < 2 || i+1 >= len(f) {
				return nil, fmt.Errorf("%s:%d: replace not understood", name, n)
			}
			target := f[i+1]
			if i+2 < len(f) {
				target += "@" + f[i+2]
			} else if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			mf.Replaces[f[1]] = target
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if mf.Path == "" {
		return nil, fmt.Errorf("%s: no module line", name)
	}
	return mf, nil
}

func indexOf(f []string, s string) int {
	for i, v := range f {
		if v == s {
			return i
		}
	}
	return -1
}

// escapeModPath applies the module cache's case encoding: "Code-Hex" is
// stored as "!code-!hex" so case-insensitive file systems stay unambiguous.
func escapeModPath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// goEnv reads one `go env` value; the test and the tool both run where the
// go command is installed, so asking it is the reliable source.
func goEnv(key string) (string, error) {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", key, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// resolver maps import paths to directories for the darwin build.
type resolver struct {
	goroot   string
	modCache string
	mainDir  string
	mod      *modFile
}

func newResolver(moduleDir string) (*resolver, error) {
	mf, err := parseGoMod(moduleDir)
	if err != nil {
		return nil, err
	}
	goroot, err := goEnv("GOROOT")
	if err != nil {
		return nil, err
	}
	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, err
	}
	return &resolver{goroot: goroot, modCache: cache, mainDir: moduleDir, mod: mf}, nil
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// resolve returns the directory of path and the package path to record
// (vendored standard-library packages get their "vendor/" prefix back).
// fromStd says the importer lives in GOROOT, which sees GOROOT/src/vendor.
func (r *resolver) resolve(path string, fromStd bool) (dir, pkgPath string, err error) {
	std := filepath.Join(r.goroot, "src")
	if fromStd && !isStd(path) {
		d := filepath.Join(std, "vendor", filepath.FromSlash(path))
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d, "vendor/" + path, nil
		}
	}
	if isStd(path) {
		return filepath.Join(std, filepath.FromSlash(path)), path, nil
	}
	if path == r.mod.Path || strings.HasPrefix(path, r.mod.Path+"/") {
		return filepath.Join(r.mainDir, filepath.FromSlash(strings.TrimPrefix(path, r.mod.Path))), path, nil
	}
	best := ""
	for m := range r.mod.Requires {
		if (path == m || strings.HasPrefix(path, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	if best == "" {
		return "", "", fmt.Errorf("import %q: no module in go.mod provides it", path)
	}
	root := filepath.Join(r.modCache, escapeModPath(best)+"@"+escapeModPath(r.mod.Requires[best]))
	if rep, ok := r.mod.Replaces[best]; ok {
		if filepath.IsAbs(rep) {
			root = rep
		} else {
			root = filepath.Join(r.modCache, escapeModPath(rep))
		}
	}
	return filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(path, best))), path, nil
}

func (r *resolver) inGoroot(dir string) bool {
	rel, err := filepath.Rel(filepath.Join(r.goroot, "src"), dir)
	return err == nil && !strings.HasPrefix(rel, "..")
}

// downloadDeps makes the go command fetch every module the darwin build of
// the module at dir needs. The resolver reads modules straight from the
// module cache, and a Linux build never downloads darwin-only ones (vz,
// and on an empty cache everything else), so without this a fresh cache
// fails with "cannot find package". cgo is on so vz's cgo files count.
func downloadDeps(dir string, arches []string) error {
	for _, arch := range arches {
		cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./...")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+arch, "CGO_ENABLED=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("download modules for darwin/%s (go list -deps in %s): %w\n%s", arch, dir, err, strings.TrimSpace(stderr.String()))
		}
	}
	return nil
}
