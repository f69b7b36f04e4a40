// Command funclen fails when a function of the module's non-test Go code is
// longer than the limit, counted in lines from `func` to the closing brace:
// a long function hides its steps, so each one gets a name instead.
//
//	go run ./hack/funclen [-max 80] [dir]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	limit := flag.Int("max", 80, "longest function allowed, in lines")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	n, err := run(os.Stdout, root, *limit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(2)
	}
	if n > 0 {
		fmt.Fprintf(os.Stderr, "funclen: %d function(s) over %d lines: split each into named steps\n", n, *limit)
		os.Exit(1)
	}
}

// LongFunc is a function over the limit.
type LongFunc struct {
	Pos   token.Position
	Name  string
	Lines int
}

// run prints every function under root longer than limit lines to w and
// returns how many there are.
func run(w io.Writer, root string, limit int) (int, error) {
	long, err := Walk(root, limit)
	if err != nil {
		return 0, err
	}
	for _, f := range long {
		fmt.Fprintf(w, "%s:%d: %s is %d lines (max %d)\n", f.Pos.Filename, f.Pos.Line, f.Name, f.Lines, limit)
	}
	return len(long), nil
}

// Walk checks every non-test .go file under root, skipping hidden folders,
// testdata and build output, as go build would not see them.
func Walk(root string, limit int) ([]LongFunc, error) {
	var long []LongFunc
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != root && skipDir(d.Name()):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		found, err := Check(fset, p, src, limit)
		long = append(long, found...)
		return err
	})
	return long, err
}

func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
		name == "testdata" || name == "bin" || name == "out" || name == "vendor"
}

// Check returns the functions and methods of one file's source longer than
// limit lines.
func Check(fset *token.FileSet, filename string, src []byte, limit int) ([]LongFunc, error) {
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var long []LongFunc
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start := fset.Position(fn.Pos())
		lines := fset.Position(fn.End()).Line - start.Line + 1
		if lines > limit {
			long = append(long, LongFunc{Pos: start, Name: funcName(fn), Lines: lines})
		}
	}
	return long, nil
}

// funcName is fn's name, with its receiver type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}
