package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Options selects what Check type-checks.
type Options struct {
	ModuleDir string   // root of the module (holds go.mod)
	Arches    []string // GOARCH values, e.g. arm64 and amd64
	Only      []string // package dirs relative to ModuleDir; empty means all
	Constants []Constant
}

// Checked is one package type-checked for one arch.
type Checked struct {
	Arch       string
	Dir        string // relative to the module
	Files      int
	DarwinOnly []string
}

// Problem is a type error in one of our packages.
type Problem struct {
	Arch string
	Pos  string // file:line:col, relative to the module when possible
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s [darwin/%s]", p.Pos, p.Msg, p.Arch) }

// Result lists what was checked and what was wrong.
type Result struct {
	Checked  []Checked
	Problems []Problem
}

// Check type-checks, for GOOS=darwin and each arch, every package of the
// module that has files only darwin builds see. Dependencies (the standard
// library, Code-Hex/vz, ...) are type-checked from source without function
// bodies and with cgo faked, so the real vz API is what our code is held to.
func Check(opts Options) (*Result, error) {
	moduleDir, err := filepath.Abs(opts.ModuleDir)
	if err != nil {
		return nil, fmt.Errorf("module dir %s: %w", opts.ModuleDir, err)
	}
	res, err := newResolver(moduleDir)
	if err != nil {
		return nil, err
	}
	dirs, err := packageDirs(moduleDir, opts.Only)
	if err != nil {
		return nil, err
	}
	if err := downloadDeps(moduleDir, opts.Arches); err != nil {
		return nil, err
	}
	out := &Result{}
	for _, arch := range opts.Arches {
		im := newImporter(res, arch)
		linux := buildContext(res.goroot, "linux", arch)
		for _, dir := range dirs {
			if err := im.checkOurs(moduleDir, dir, linux, out); err != nil {
				return nil, err
			}
		}
		out.Problems = append(out.Problems, im.checkConstants(moduleDir, opts.Constants)...)
	}
	return out, nil
}

// packageDirs lists candidate package folders; nested modules, testdata
// and hidden folders are not part of this module's build.
func packageDirs(root string, only []string) ([]string, error) {
	if len(only) > 0 {
		dirs := make([]string, 0, len(only))
		for _, o := range only {
			d := filepath.Join(root, filepath.FromSlash(o))
			if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
				return nil, fmt.Errorf("package dir %q: not a folder under %s", o, root)
			}
			dirs = append(dirs, d)
		}
		return dirs, nil
	}
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != root {
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		dirs = append(dirs, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	return dirs, nil
}

func buildContext(goroot, goos, goarch string) build.Context {
	ctx := build.Default
	ctx.GOROOT = goroot
	ctx.GOOS = goos
	ctx.GOARCH = goarch
	ctx.CgoEnabled = true
	ctx.Dir = ""
	return ctx
}

// importer is a types.ImporterFrom that loads packages from source for one
// darwin arch and caches them by directory.
type importer struct {
	res   *resolver
	arch  string
	ctx   build.Context
	fset  *token.FileSet
	sizes types.Sizes
	pkgs  map[string]*types.Package // by dir; nil while being loaded
}

func newImporter(res *resolver, arch string) *importer {
	return &importer{
		res:   res,
		arch:  arch,
		ctx:   buildContext(res.goroot, "darwin", arch),
		fset:  token.NewFileSet(),
		sizes: types.SizesFor("gc", arch),
		pkgs:  map[string]*types.Package{},
	}
}

func (im *importer) Import(path string) (*types.Package, error) {
	return im.ImportFrom(path, "", 0)
}

func (im *importer) ImportFrom(path, fromDir string, _ types.ImportMode) (*types.Package, error) {
	if path == "unsafe" {
		return types.Unsafe, nil
	}
	dir, pkgPath, err := im.res.resolve(path, fromDir != "" && im.res.inGoroot(fromDir))
	if err != nil {
		return nil, err
	}
	if pkg, seen := im.pkgs[dir]; seen {
		if pkg == nil {
			return nil, fmt.Errorf("import cycle through %s", path)
		}
		return pkg, nil
	}
	im.pkgs[dir] = nil
	bp, err := im.ctx.ImportDir(dir, 0)
	if err != nil {
		return nil, fmt.Errorf("import %s (darwin/%s): %w", path, im.arch, err)
	}
	files, err := im.parse(dir, append(slices.Clone(bp.GoFiles), bp.CgoFiles...))
	if err != nil {
		return nil, err
	}
	conf := types.Config{
		Importer:         im,
		Sizes:            im.sizes,
		FakeImportC:      true,
		IgnoreFuncBodies: true,
		// Dependencies are not ours to fix, and faking cgo leaves some
		// of their expressions untyped; only our own errors count.
		Error: func(error) {},
	}
	pkg, _ := conf.Check(pkgPath, im.fset, files, nil)
	im.pkgs[dir] = pkg
	return pkg, nil
}

func (im *importer) parse(dir string, names []string) ([]*ast.File, error) {
	files := make([]*ast.File, 0, len(names))
	for _, n := range names {
		f, err := parser.ParseFile(im.fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, n), err)
		}
		files = append(files, f)
	}
	return files, nil
}

// checkOurs type-checks dir in full (function bodies too) when it has
// darwin-only files, recording every error as a Problem.
func (im *importer) checkOurs(moduleDir, dir string, linux build.Context, out *Result) error {
	rel, _ := filepath.Rel(moduleDir, dir)
	rel = filepath.ToSlash(rel)
	bp, err := im.ctx.ImportDir(dir, 0)
	var noGo *build.NoGoError
	if errors.As(err, &noGo) {
		return nil
	}
	if err != nil {
		out.Problems = append(out.Problems, Problem{Arch: im.arch, Pos: rel, Msg: err.Error()})
		return nil
	}
	darwinFiles := append(slices.Clone(bp.GoFiles), bp.CgoFiles...)
	other := map[string]bool{}
	if lp, err := linux.ImportDir(dir, 0); err == nil {
		for _, f := range append(lp.GoFiles, lp.CgoFiles...) {
			other[f] = true
		}
	}
	var darwinOnly []string
	for _, f := range darwinFiles {
		if !other[f] {
			darwinOnly = append(darwinOnly, f)
		}
	}
	if len(darwinOnly) == 0 {
		return nil
	}
	sort.Strings(darwinOnly)
	files, err := im.parse(dir, darwinFiles)
	if err != nil {
		out.Problems = append(out.Problems, Problem{Arch: im.arch, Pos: rel, Msg: err.Error()})
		return nil
	}
	conf := types.Config{
		Importer:    im,
		Sizes:       im.sizes,
		FakeImportC: true,
		Error: func(err error) {
			var te types.Error
			if !errors.As(err, &te) {
				out.Problems = append(out.Problems, Problem{Arch: im.arch, Pos: rel, Msg: err.Error()})
				return
			}
			pos := te.Fset.Position(te.Pos)
			if r, err := filepath.Rel(moduleDir, pos.Filename); err == nil {
				pos.Filename = r
			}
			out.Problems = append(out.Problems, Problem{Arch: im.arch, Pos: pos.String(), Msg: te.Msg})
		},
	}
	pkgPath := im.res.mod.Path
	if rel != "." {
		pkgPath += "/" + rel
	}
	_, _ = conf.Check(pkgPath, im.fset, files, nil)
	out.Checked = append(out.Checked, Checked{Arch: im.arch, Dir: rel, Files: len(darwinFiles), DarwinOnly: darwinOnly})
	return nil
}
