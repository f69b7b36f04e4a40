package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	repoPathSpan = regexp.MustCompile("`([a-z][a-z0-9_-]*(?:/[A-Za-z0-9_.-]+)+)`")
	goSelector   = regexp.MustCompile(`\.[A-Z][A-Za-z0-9]*(\.[A-Za-z0-9]+)*$`)
)

// checkRepoPaths reports code spans in pages' prose that name a path in
// one of the module's top folders (a package such as `vm/hostagent`, a
// file such as `hack/deps.sh`, or `x/...`) that is not there: a package
// moved or renamed without its docs.
func checkRepoPaths(root string, pages []string, topDirs map[string]bool) []string {
	var problems []string
	built := builtDirs(root)
	for _, page := range pages {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", page, err))
			continue
		}
		seen := map[string]bool{}
		for _, m := range repoPathSpan.FindAllStringSubmatch(proseWithCode(string(text)), -1) {
			path := strings.TrimSuffix(m[1], "/...")
			path = goSelector.ReplaceAllString(path, "") // vm/instance.Lock
			if !topDirs[strings.SplitN(path, "/", 2)[0]] || seen[path] {
				continue
			}
			seen[path] = true
			if built(path) {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, path)); err != nil {
				problems = append(problems, fmt.Sprintf("%s names `%s`, which is not in the repository (moved or renamed?): fix the name in %s", page, m[1], page))
			}
		}
	}
	return problems
}

// builtDirs reports whether a path is under a folder .gitignore names from
// the root (such as /hack/image/out/): a build makes those, a checkout
// does not have them.
func builtDirs(root string) func(path string) bool {
	var dirs []string
	if b, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "/") && strings.HasSuffix(line, "/") {
				dirs = append(dirs, strings.Trim(line, "/"))
			}
		}
	}
	return func(path string) bool {
		for _, d := range dirs {
			if path == d || strings.HasPrefix(path, d+"/") {
				return true
			}
		}
		return false
	}
}

// proseWithCode is the page without its fenced code blocks, code spans
// kept: those are where prose names paths.
func proseWithCode(page string) string {
	var b strings.Builder
	inFence := false
	for _, line := range strings.SplitAfter(page, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence {
			b.WriteString(line)
		}
	}
	return b.String()
}

// moduleTopDirs are the first path elements of the module's packages.
func moduleTopDirs(pkgs []pkg) map[string]bool {
	dirs := map[string]bool{}
	for _, p := range pkgs {
		dirs[strings.SplitN(p.path, "/", 2)[0]] = true
	}
	return dirs
}
