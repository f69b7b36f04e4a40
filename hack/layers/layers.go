// Package layers is vmdock's package layering, top to bottom, and the check
// that every import points down: a package may import module packages of
// its own layer or of a lower one, never of a higher one. Its test runs
// the check on the module (go list, for Linux and macOS, tests' imports
// included), so `make test` fails on an arrow pointing up and on a
// package placed in no layer: a new package gets its layer deliberately.
package layers

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// Module is the module path the table's entries are relative to.
const Module = "github.com/vmdock/vmdock"

// Layer is one rung: its packages, by path below Module; "x/..." is x and
// every package under it.
type Layer struct {
	Name     string
	Packages []string
}

// Table is the layering, top (layer 0) to bottom.
var Table = []Layer{
	{"tools", []string{"cmd/...", "hack/..."}},
	{"doctor", []string{"doctor"}},
	{"bench", []string{"bench/..."}},
	{"migrate", []string{"migrate", "migrate/migratetest"}},
	{"instance lifecycle (command line side)", []string{"vm/instance"}},
	{"host agent (daemon)", []string{"vm/hostagent"}},
	{"hypervisor drivers", []string{"vm/qemu", "vm/vz"}},
	{"instance config, files and control API", []string{"vm/config", "vm/store", "vm/store/storetest", "vm/layout", "vm/control", "vm/resume", "vm/cidata", "vm/filesync"}},
	{"VM description and host facts", []string{"vm/driver", "vm/logfile", "vm/macos", "vm/sockpath", "vm/hostcerts", "vm/idle", "vm/remote"}},
	{"network", []string{"network/..."}},
	{"docker on the host", []string{"dockerhost/..."}},
	{"guest agent server", []string{"agent/guest", "agent/remotehelper"}},
	{"guest agent features", []string{
		"agent/guest/binfmt", "agent/guest/corpnet", "agent/guest/disks", "agent/guest/dnsforward",
		"agent/guest/exec", "agent/guest/hostaccess", "agent/guest/idle", "agent/guest/ports",
		"agent/guest/runtime/...", "agent/guest/shares", "agent/guest/sshagent",
	}},
	{"guest system", []string{"agent/guest/guestos/..."}},
	{"guest agent protocol and images", []string{"agent", "agent/agentbin", "agent/lenprefix", "agent/portlist", "images/..."}},
	{"mounts", []string{"mounts/..."}},
	{"leaves", []string{"internal/..."}},
}

// Drivers are the VM driver packages. Of the packages below the tools,
// only DriverWiring's package imports them, and in it only DriverWiring:
// everything else reaches a VM through vm/driver, or through a function
// cmd/vmdock hands it, so the CLI side and the checks stay free of any one
// hypervisor.
var Drivers = []string{"vm/qemu", "vm/vz"}

// DriverWiring is the one file below the tools that picks a driver.
const DriverWiring = "vm/hostagent/drivers.go"

// CheckDriverImports returns every package in imports (as for Check) that
// imports a driver though it is neither a tool (tableTop, the first
// layer's entries) nor DriverWiring's package, as "importer → driver".
// A driver's own package (tests included) may import itself.
func CheckDriverImports(tableTop []string, imports map[string][]string) []string {
	wiring := path.Dir(DriverWiring)
	var problems []string
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		if p == wiring || slices.ContainsFunc(tableTop, func(e string) bool { return matches(e, p) }) {
			continue
		}
		deps := append([]string(nil), imports[p]...)
		sort.Strings(deps)
		for _, d := range deps {
			if d != p && slices.Contains(Drivers, d) {
				problems = append(problems, fmt.Sprintf("%s imports the driver %s: below the tools only %s links a driver; take what you need through vm/driver or a function cmd/vmdock sets", p, d, DriverWiring))
			}
		}
	}
	return problems
}

// Check returns what is wrong with imports (package path → the module
// packages it imports, paths below Module) against table: a package in no
// layer or in several, a table entry naming no package, and every import
// of a higher layer, as "importer (layer) → imported (layer)". Nil: the
// layering holds.
func Check(table []Layer, imports map[string][]string) []string {
	var problems []string
	layerOf := map[string]int{}
	used := map[string]bool{}
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		var in []string
		for i, l := range table {
			for _, e := range l.Packages {
				if matches(e, p) {
					used[e] = true
					if _, ok := layerOf[p]; !ok {
						layerOf[p] = i
					}
					in = append(in, fmt.Sprintf("%q (%s)", l.Name, e))
				}
			}
		}
		switch {
		case len(in) == 0:
			problems = append(problems, fmt.Sprintf("package %s is in no layer: add it to hack/layers' Table where it belongs", p))
		case len(in) > 1:
			problems = append(problems, fmt.Sprintf("package %s is in more than one layer: %s", p, strings.Join(in, ", ")))
		}
	}
	for _, l := range table {
		for _, e := range l.Packages {
			if !used[e] {
				problems = append(problems, fmt.Sprintf("layer %q names %s, which is no package of the module", l.Name, e))
			}
		}
	}
	for _, p := range pkgs {
		from, ok := layerOf[p]
		if !ok {
			continue
		}
		deps := append([]string(nil), imports[p]...)
		sort.Strings(deps)
		for _, d := range deps {
			to, ok := layerOf[d]
			if ok && to < from {
				problems = append(problems, fmt.Sprintf("%s (layer %d %q) imports %s (layer %d %q): an arrow up", p, from, table[from].Name, d, to, table[to].Name))
			}
		}
	}
	return problems
}

// matches reports whether table entry e names package p.
func matches(e, p string) bool {
	if base, ok := strings.CutSuffix(e, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == e
}
