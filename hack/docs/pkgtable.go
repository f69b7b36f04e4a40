package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vmdock/vmdock/hack/layers"
)

// ArchitecturePage is the page that holds the package table and the boot
// steps, relative to the module root.
const ArchitecturePage = "docs/architecture.md"

// The markers around the generated parts: the layers drawing and the
// package table.
const (
	layersMarker   = "layers"
	pkgTableMarker = "package-table"
)

// pkg is one package of the module as the table shows it.
type pkg struct {
	path    string // below the module
	doc     string // the first sentence of its doc comment
	imports []string
}

// listPackages asks go list for the module's packages, their doc comment's
// first sentence and the module packages they import, for Linux and macOS
// together (the platform files differ), tests left out.
func listPackages(root string) ([]pkg, error) {
	byPath := map[string]*pkg{}
	imports := map[string]map[string]bool{}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command(goCommand(), "list", "-e", "-json=ImportPath,Doc,Imports,Error", "./...")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list (GOOS=%s): %w: %s", goos, err, stderr.String())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p struct {
				ImportPath, Doc string
				Imports         []string
				Error           *struct{ Err string }
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("go list (GOOS=%s): %w", goos, err)
			}
			if p.Error != nil {
				return nil, fmt.Errorf("go list (GOOS=%s): %s: %s", goos, p.ImportPath, p.Error.Err)
			}
			path, ok := belowModule(p.ImportPath)
			if !ok {
				continue
			}
			if byPath[path] == nil {
				byPath[path] = &pkg{path: path, doc: p.Doc}
				imports[path] = map[string]bool{}
			}
			for _, imp := range p.Imports {
				if imp, ok := belowModule(imp); ok && imp != path {
					imports[path][imp] = true
				}
			}
		}
	}
	pkgs := make([]pkg, 0, len(byPath))
	for path, p := range byPath {
		for imp := range imports[path] {
			p.imports = append(p.imports, imp)
		}
		sort.Strings(p.imports)
		pkgs = append(pkgs, *p)
	}
	sortByLayer(pkgs)
	return pkgs, nil
}

func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(build.Default.GOROOT, "bin", "go")
}

func belowModule(path string) (string, bool) {
	return strings.CutPrefix(path, layers.Module+"/")
}

// layerOf is the index of the first layer of hack/layers' Table naming
// path, or len(Table) when none does (the layers test reports that).
func layerOf(path string) int {
	for i, l := range layers.Table {
		for _, e := range l.Packages {
			base, all := strings.CutSuffix(e, "/...")
			if path == base || (all && strings.HasPrefix(path, base+"/")) {
				return i
			}
		}
	}
	return len(layers.Table)
}

// sortByLayer orders pkgs top layer first, then by path.
func sortByLayer(pkgs []pkg) {
	sort.Slice(pkgs, func(i, j int) bool {
		li, lj := layerOf(pkgs[i].path), layerOf(pkgs[j].path)
		if li != lj {
			return li < lj
		}
		return pkgs[i].path < pkgs[j].path
	})
}

// packageTable renders the table, in pkgs' order.
func packageTable(pkgs []pkg) string {
	var b strings.Builder
	b.WriteString("| package | layer | its one job (the package doc's first sentence) | imports (vmdock packages) |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, p := range pkgs {
		layer := "(none)"
		if i := layerOf(p.path); i < len(layers.Table) {
			layer = layers.Table[i].Name
		}
		doc := p.doc
		if doc == "" {
			doc = "(no package doc comment)"
		}
		imps := "—"
		if len(p.imports) > 0 {
			imps = "`" + strings.Join(p.imports, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", p.path, layer, markdownCell(doc), imps)
	}
	return b.String()
}

// layersDrawing is hack/layers' Table with the packages go list found in
// each layer, top layer first, as a code block.
func layersDrawing(pkgs []pkg) string {
	const width, indent = 110, 4
	var b strings.Builder
	b.WriteString("```\n(top) each layer imports only its own and the layers below it\n")
	for i, l := range layers.Table {
		fmt.Fprintf(&b, "%2d %s\n", i+1, l.Name)
		line := strings.Repeat(" ", indent)
		for _, p := range pkgs {
			if layerOf(p.path) != i {
				continue
			}
			if len(line)+len(p.path) > width && strings.TrimSpace(line) != "" {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = strings.Repeat(" ", indent)
			}
			line += p.path + "  "
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

// markdownCell makes text safe in a table cell: a pipe would end the cell
// and, outside code spans, <name> would be read as an HTML tag.
func markdownCell(text string) string {
	parts := strings.Split(text, "`")
	for i, part := range parts {
		part = strings.ReplaceAll(part, "|", `\|`)
		if i%2 == 0 {
			part = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(part)
		}
		parts[i] = part
	}
	return strings.Join(parts, "`")
}

// renderArchitecture is the architecture page with a fresh package table.
func renderArchitecture(root string) (current, fresh string, err error) {
	page, err := os.ReadFile(filepath.Join(root, ArchitecturePage))
	if err != nil {
		return "", "", err
	}
	pkgs, err := listPackages(root)
	if err != nil {
		return "", "", err
	}
	fresh, err = replaceBetween(string(page), layersMarker, layersDrawing(pkgs))
	if err == nil {
		fresh, err = replaceBetween(fresh, pkgTableMarker, packageTable(pkgs))
	}
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", ArchitecturePage, err)
	}
	return string(page), fresh, nil
}

// writePackageTable rewrites the table in the architecture page.
func writePackageTable(root string) error {
	current, fresh, err := renderArchitecture(root)
	if err != nil {
		return err
	}
	if current == fresh {
		return nil
	}
	return os.WriteFile(filepath.Join(root, ArchitecturePage), []byte(fresh), 0o644)
}
