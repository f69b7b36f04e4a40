package layers

import (
	"bytes"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// moduleImports lists every package of the module with the module
// packages it imports (its tests' too), as go list sees them for each
// GOOS vmdock runs on; cgo on, so vz's macOS files count.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	readSources(t)
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	sets := map[string]map[string]bool{}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command(goCmd, "list", "-e", "-f",
			`{{.ImportPath}}|{{with .Error}}{{.Err}}{{end}}|{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`,
			Module+"/...")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (GOOS=%s): %v\n%s", goos, err, stderr.String())
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.SplitN(line, "|", 3)
			if len(f) != 3 {
				t.Fatalf("go list (GOOS=%s) said %q", goos, line)
			}
			if f[1] != "" {
				t.Fatalf("go list (GOOS=%s): %s: %s", goos, f[0], f[1])
			}
			p, ok := below(f[0])
			if !ok {
				continue
			}
			if sets[p] == nil {
				sets[p] = map[string]bool{}
			}
			for _, d := range strings.Fields(f[2]) {
				if d, ok := below(d); ok && d != p {
					sets[p][d] = true
				}
			}
		}
	}
	imports := map[string][]string{}
	for p, deps := range sets {
		imports[p] = []string{}
		for d := range deps {
			imports[p] = append(imports[p], d)
		}
	}
	return imports
}

// below is path relative to Module, if it is one of the module's.
func below(path string) (string, bool) {
	if path == Module {
		return ".", true
	}
	return strings.CutPrefix(path, Module+"/")
}

// Every package is in one layer and imports only its own layer or lower
// ones.
func TestModuleKeepsItsLayers(t *testing.T) {
	imports := moduleImports(t)
	if len(imports) < 10 {
		t.Fatalf("go list found only %d packages: %v", len(imports), imports)
	}
	for _, p := range Check(Table, imports) {
		t.Error(p)
	}
}

// Below the tools, only the host agent's driver wiring imports a driver,
// in the package's other files and tests included.
func TestOnlyTheDriverWiringImportsDrivers(t *testing.T) {
	for _, p := range CheckDriverImports(Table[0].Packages, moduleImports(t)) {
		t.Error(p)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	wiringDir := filepath.Join(root, filepath.FromSlash(path.Dir(DriverWiring)))
	files, err := filepath.Glob(filepath.Join(wiringDir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s (%v)", wiringDir, err)
	}
	for _, file := range files {
		if filepath.Base(file) == path.Base(DriverWiring) {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if d, ok := below(strings.Trim(imp.Path.Value, `"`)); ok && slices.Contains(Drivers, d) {
				t.Errorf("%s imports %s: in its package only %s may", file, d, DriverWiring)
			}
		}
	}
}

// The drivers compile without gVisor: the host agent runs the network
// stack and hands a driver only a socket and the NIC's MAC in its spec.
func TestDriversDoNotLinkTheNetworkStack(t *testing.T) {
	readSources(t)
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	for _, goos := range []string{"linux", "darwin"} {
		args := []string{"list", "-deps"}
		for _, d := range Drivers {
			args = append(args, Module+"/"+d)
		}
		cmd := exec.Command(goCmd, args...)
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps (GOOS=%s): %v", goos, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "gvisor.dev/") || dep == Module+"/network/usernet" {
				t.Errorf("GOOS=%s: the drivers depend on %s", goos, dep)
			}
		}
	}
}

// The driver check lets the tools and the wiring link drivers, and a
// driver its own package, and names everyone else.
func TestCheckDriverImportsRefusesOthers(t *testing.T) {
	imports := map[string][]string{
		"cmd/vmdock":     {"vm/qemu", "vm/vz", "doctor"},
		"hack/tool":      {"vm/vz"},
		"vm/hostagent":   {"vm/qemu", "vm/vz"},
		"vm/qemu":        {"vm/qemu", "vm/driver"},
		"vm/instance":    {"vm/qemu", "vm/store"},
		"doctor":         {"vm/driver", "vm/vz"},
		"bench/scratch":  {"vm/qemu"},
		"vm/vz":          {"vm/qemu"},
		"vm/driver":      {},
		"network/domain": {"vm/driver"},
	}
	got := CheckDriverImports([]string{"cmd/...", "hack/..."}, imports)
	var heads []string
	for _, p := range got {
		head, _, _ := strings.Cut(p, ":")
		heads = append(heads, head)
	}
	want := []string{
		"bench/scratch imports the driver vm/qemu",
		"doctor imports the driver vm/vz",
		"vm/instance imports the driver vm/qemu",
		"vm/vz imports the driver vm/qemu",
	}
	if !slices.Equal(heads, want) {
		t.Errorf("CheckDriverImports said\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The check refuses the three arrows an earlier split removed: the guest agent
// protocol and mounts leaning on vm/driver, the daemon on the bench.
func TestCheckRefusesArrowsUp(t *testing.T) {
	imports := map[string][]string{
		"agent":         {"vm/driver"},
		"mounts":        {"vm/driver"},
		"vm/driver":     {"mounts"},
		"vm/hostagent":  {"bench/scratch", "vm/driver", "agent"},
		"bench/scratch": {},
	}
	table := []Layer{
		{"bench", []string{"bench/..."}},
		{"host agent", []string{"vm/hostagent"}},
		{"driver", []string{"vm/driver"}},
		{"agent", []string{"agent/..."}},
		{"mounts", []string{"mounts/..."}},
	}
	got := Check(table, imports)
	want := []string{
		`agent (layer 3 "agent") imports vm/driver (layer 2 "driver"): an arrow up`,
		`mounts (layer 4 "mounts") imports vm/driver (layer 2 "driver"): an arrow up`,
		`vm/hostagent (layer 1 "host agent") imports bench/scratch (layer 0 "bench"): an arrow up`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Check said\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A package the table does not place, one it places twice and an entry
// that names nothing are each an error, so the table follows the code.
func TestCheckWantsEveryPackagePlacedOnce(t *testing.T) {
	imports := map[string][]string{"a": {}, "b/c": {}, "new": {}}
	table := []Layer{
		{"top", []string{"a", "b/..."}},
		{"bottom", []string{"b/c", "gone"}},
	}
	got := Check(table, imports)
	for _, w := range []string{
		"package b/c is in more than one layer",
		"package new is in no layer",
		`layer "bottom" names gone, which is no package of the module`,
	} {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("Check said %q, want a problem saying %q", got, w)
		}
	}
}

// readSources reads every Go file and folder of the module. go test caches
// a passing result keyed on what the test itself opened, and go list runs
// in a child process: without this, a new package or import would be
// judged only once this package changed.
func readSources(t *testing.T) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "out" || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir():
			_, err := os.ReadDir(p)
			return err
		case strings.HasSuffix(p, ".go"):
			_, err := os.ReadFile(p)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read the module's sources: %v", err)
	}
}
