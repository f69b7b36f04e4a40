package main

import (
	"fmt"
	"go/constant"
	"go/types"
)

// Constant is a value our pure code relies on a package's constant having:
// vm/vz's mode tables store vz enum cases as name and value, and only a
// check against vz's source can tell when the two part ways.
type Constant struct {
	Pkg   string // import path, e.g. github.com/Code-Hex/vz/v3
	Name  string
	Value int64
}

// checkConstants loads each constant's package for this importer's arch
// and compares.
func (im *importer) checkConstants(moduleDir string, want []Constant) []Problem {
	var problems []Problem
	bad := func(c Constant, format string, args ...any) {
		problems = append(problems, Problem{Arch: im.arch, Pos: c.Pkg + "." + c.Name, Msg: fmt.Sprintf(format, args...)})
	}
	for _, c := range want {
		pkg, err := im.ImportFrom(c.Pkg, moduleDir, 0)
		if err != nil || pkg == nil {
			bad(c, "cannot load %s: %v", c.Pkg, err)
			continue
		}
		obj, ok := pkg.Scope().Lookup(c.Name).(*types.Const)
		if !ok {
			bad(c, "no constant %s in %s", c.Name, c.Pkg)
			continue
		}
		got, exact := constant.Int64Val(constant.ToInt(obj.Val()))
		if !exact {
			bad(c, "%s is not an integer constant (%s)", c.Name, obj.Val())
			continue
		}
		if got != c.Value {
			bad(c, "is %d in %s, but our table says %d", got, c.Pkg, c.Value)
		}
	}
	return problems
}
