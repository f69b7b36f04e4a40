// Command darwincheck type-checks the macOS-only code of this module on any
// OS: every package with darwin-only files is checked with go/types for
// GOOS=darwin and each GOARCH, against the real Go source of its
// dependencies (notably github.com/Code-Hex/vz/v3), with cgo faked. In this
// repository it also holds vm/vz's mode tables (vz enum name and value) to
// the constants in vz's source, which catches a swapped mapping the type
// checker cannot. It then runs `GOOS=darwin CGO_ENABLED=0 go build ./...`
// for the no-cgo fallback.
//
// Usage: go run ./hack/darwincheck [-C dir] [-arch arm64,amd64] [-pkg vm/vz,...] [-skip-build]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	vmvz "github.com/vmdock/vmdock/vm/vz"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("darwincheck", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("C", "", "module root (default: nearest go.mod above the current folder)")
	arches := fl.String("arch", "arm64,amd64", "darwin GOARCH values to check, comma separated")
	only := fl.String("pkg", "", "package folders to check, relative to the module, comma separated (default: all)")
	skipBuild := fl.Bool("skip-build", false, "skip `GOOS=darwin CGO_ENABLED=0 go build ./...`")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	root := *dir
	if root == "" {
		var err error
		if root, err = findModuleRoot(); err != nil {
			fmt.Fprintln(stderr, "darwincheck:", err)
			return 2
		}
	}
	archList := splitList(*arches)
	for _, a := range archList {
		if a != "arm64" && a != "amd64" {
			fmt.Fprintf(stderr, "darwincheck: arch %q not accepted (accepted: arm64, amd64)\n", a)
			return 2
		}
	}

	consts, err := ourConstants(root)
	if err != nil {
		fmt.Fprintln(stderr, "darwincheck:", err)
		return 2
	}
	res, err := Check(Options{ModuleDir: root, Arches: archList, Only: splitList(*only), Constants: consts})
	if err != nil {
		fmt.Fprintln(stderr, "darwincheck:", err)
		return 2
	}
	for _, c := range res.Checked {
		fmt.Fprintf(stdout, "checked darwin/%s %s: %d files, darwin-only: %s\n", c.Arch, c.Dir, c.Files, strings.Join(c.DarwinOnly, " "))
	}
	if len(res.Checked) == 0 {
		fmt.Fprintln(stdout, "no package has darwin-only files")
	}
	failed := false
	for _, p := range res.Problems {
		fmt.Fprintln(stdout, p)
		failed = true
	}
	if !*skipBuild {
		targets := []string{"./..."}
		if pkgs := splitList(*only); len(pkgs) > 0 {
			targets = targets[:0]
			for _, p := range pkgs {
				targets = append(targets, "./"+strings.TrimPrefix(p, "./"))
			}
		}
		for _, arch := range archList {
			if err := buildNoCgo(root, arch, targets, stdout); err != nil {
				fmt.Fprintln(stdout, err)
				failed = true
			}
		}
	}
	if failed {
		return 1
	}
	fmt.Fprintln(stdout, "darwincheck: ok")
	return 0
}

// vmdockModule is this repository's module: only its vz tables are ours
// to hold against vz; other modules (the tests' throwaway ones) get none.
const vmdockModule = "github.com/vmdock/vmdock"

// ourConstants is the vz enum cases vm/vz's tables rely on, when root is
// this repository.
func ourConstants(root string) ([]Constant, error) {
	mf, err := parseGoMod(root)
	if err != nil {
		return nil, err
	}
	if mf.Path != vmdockModule {
		return nil, nil
	}
	pkg, cases := vmvz.VZEnumCases()
	consts := make([]Constant, 0, len(cases))
	for _, c := range cases {
		consts = append(consts, Constant{Pkg: pkg, Name: c.Name, Value: c.Value})
	}
	return consts, nil
}

// buildNoCgo proves the CGO_ENABLED=0 fallback files compile for darwin.
func buildNoCgo(root, arch string, targets []string, stdout io.Writer) error {
	args := append([]string{"build", "-o", os.DevNull}, targets...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+arch, "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("GOOS=darwin GOARCH=%s CGO_ENABLED=0 go build %s failed: %w\n%s", arch, strings.Join(targets, " "), err, out)
	}
	fmt.Fprintf(stdout, "built GOOS=darwin GOARCH=%s CGO_ENABLED=0 %s\n", arch, strings.Join(targets, " "))
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the current folder")
		}
		dir = parent
	}
}
