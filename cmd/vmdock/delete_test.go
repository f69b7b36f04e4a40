package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDeleteRefusesSymlinkedFolder(t *testing.T) {
	home, _ := env(t)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	target := t.TempDir()
	for _, f := range []string{"vmdock.yaml", "data.raw", "thesis.tex"} {
		if err := os.WriteFile(filepath.Join(target, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(home, 0o700)
	if err := os.Symlink(target, filepath.Join(home, "default")); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, target)
	for _, args := range [][]string{{"delete", "--data"}, {"delete"}, {"delete", "--data", "--force"}} {
		_, err := run(args...)
		if err == nil || !strings.Contains(err.Error(), "symbolic link") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%v through a symlink: %v; want a one-line refusal", args, err)
		}
		if treeHash(t, target) != before {
			t.Fatalf("%v changed the link's target", args)
		}
	}
}
