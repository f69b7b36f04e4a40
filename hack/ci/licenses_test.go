package ci

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// allowed are the licenses whose code may ship in an Apache-2.0 binary
// (docs/licenses.md says why for each).
var allowed = map[string]bool{"Apache-2.0": true, "MIT": true, "BSD-2-Clause": true, "BSD-3-Clause": true, "ISC": true, "MPL-2.0": true}

// classify names a module's license from its license file's text.
func classify(text string) string {
	switch {
	case strings.Contains(text, "MIT License") && strings.Contains(text, "All code that resides under the sspl directory"):
		// Mutagen: MIT but for its sspl/ folder, which TestDependencyLicenses
		// checks nothing links.
		return "MIT"
	case strings.Contains(text, "Mozilla Public License"):
		return "MPL-2.0"
	case strings.Contains(text, "GNU GENERAL PUBLIC") || strings.Contains(text, "GNU LESSER") || strings.Contains(text, "Server Side Public License"):
		return "copyleft"
	case strings.Contains(text, "Apache License") && strings.Contains(text, "Permission is hereby granted, free of charge"):
		return "Apache-2.0 and MIT"
	case strings.Contains(text, "Apache License"):
		return "Apache-2.0"
	case strings.Contains(text, "Permission is hereby granted, free of charge"):
		return "MIT"
	case strings.Contains(text, "Redistribution and use in source and binary forms") && strings.Contains(text, "Neither the name"):
		return "BSD-3-Clause"
	case strings.Contains(text, "Redistribution and use in source and binary forms"):
		return "BSD-2-Clause"
	case strings.Contains(text, "ISC License") || strings.Contains(text, "Permission to use, copy, modify, and/or distribute"):
		return "ISC"
	}
	return "unknown"
}

// linkedModules lists the modules the shipped binaries link (vmdock for
// Linux and macOS, the guest agent), "path version dir".
func linkedModules(t *testing.T) []string {
	t.Helper()
	format := `{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}`
	// Packages too, by import path: a module's license may exclude a
	// folder (Mutagen's sspl/).
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-deps", "./cmd/vmdock", "./cmd/vmdock-agent")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (%s): %v", goos, err)
		}
		if strings.Contains(string(out), "/sspl") {
			t.Errorf("a package under an sspl/ folder (Server Side Public License) is linked:\n%s", out)
		}
	}
	seen := map[string]bool{}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-deps", "-f", format, "./cmd/vmdock", "./cmd/vmdock-agent")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (%s): %v", goos, err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				seen[line] = true
			}
		}
	}
	var mods []string
	for m := range seen {
		mods = append(mods, m)
	}
	sort.Strings(mods)
	return mods
}

// TestDependencyLicenses: every module linked into a shipped binary has a
// license that allows shipping it in vmdock's Apache-2.0 binaries, and
// docs/licenses.md lists each, with that license, at that version.
func TestDependencyLicenses(t *testing.T) {
	root := repoRoot(t)
	lic, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil || !strings.Contains(string(lic), "Apache License\n                           Version 2.0, January 2004") {
		t.Fatalf("LICENSE at the repository's root: %v; want the Apache License 2.0", err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "licenses.md"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range linkedModules(t) {
		f := strings.Fields(m)
		kind := "unknown"
		for _, name := range []string{"LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING"} {
			if b, err := os.ReadFile(filepath.Join(f[2], name)); err == nil {
				kind = classify(string(b))
				break
			}
		}
		for _, k := range strings.Split(kind, " and ") {
			if !allowed[k] {
				t.Errorf("%s %s: license %s, not one vmdock may ship", f[0], f[1], kind)
			}
		}
		row := fmt.Sprintf("| %s | %s | %s |", f[0], f[1], kind)
		want = append(want, row)
		if !strings.Contains(string(doc), row+"\n") {
			t.Errorf("docs/licenses.md lacks the row %s", row)
		}
	}
	rows := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| ") && strings.Count(line, "|") == 4 && !strings.HasPrefix(line, "| module") && !strings.HasPrefix(line, "|---") {
			rows++
		}
	}
	if rows != len(want) {
		t.Errorf("docs/licenses.md has %d module rows, want %d:\n%s", rows, len(want), strings.Join(want, "\n"))
	}
}
