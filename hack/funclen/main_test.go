package main

import (
	"bytes"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// funcOf is a function named name whose declaration spans lines lines.
func funcOf(name string, lines int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "func %s() {\n", name)
	for i := 0; i < lines-2; i++ {
		b.WriteString("\t_ = 0\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func TestCheckFlagsOnlyTheLongFunction(t *testing.T) {
	src := "package p\n\n" + funcOf("fine", 80) + "\n" + funcOf("tooLong", 81) +
		"\ntype T struct{}\n\n" + "func (t *T) " + strings.TrimPrefix(funcOf("method", 90), "func ")
	got, err := Check(token.NewFileSet(), "p.go", []byte(src), 80)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("Check found %+v, want tooLong and T.method", got)
	}
	if got[0].Name != "tooLong" || got[0].Lines != 81 || got[0].Pos.Line != 84 {
		t.Errorf("first long function = %+v, want tooLong, 81 lines, at line 84", got[0])
	}
	if got[1].Name != "T.method" || got[1].Lines != 90 {
		t.Errorf("second long function = %+v, want T.method, 90 lines", got[1])
	}
}

func TestCheckReportsParseErrors(t *testing.T) {
	if _, err := Check(token.NewFileSet(), "bad.go", []byte("package p\nfunc {"), 80); err == nil {
		t.Fatal("Check of broken source: no error")
	}
}

func TestRunSkipsTestFilesAndTestdata(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/a.go", "package a\n\n"+funcOf("short", 3))
	write("a/a_test.go", "package a\n\n"+funcOf("longTest", 200))
	write("a/testdata/x.go", "package x\n\n"+funcOf("longData", 200))
	write("b/b.go", "package b\n\n"+funcOf("longB", 81))
	var out bytes.Buffer
	n, err := run(&out, dir, 80)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || !strings.Contains(out.String(), "longB is 81 lines (max 80)") {
		t.Errorf("run = %d, %q; want only longB reported", n, out.String())
	}
}
