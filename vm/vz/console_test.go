package vz

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateConsoleLogMakesAMissingLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serial.log")
	if err := createConsoleLog(path); err != nil {
		t.Fatalf("createConsoleLog = %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no log after createConsoleLog: %v", err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != 0 {
		t.Errorf("log mode %v size %d, want an empty 0600 file", fi.Mode().Perm(), fi.Size())
	}
}

// Earlier boots' output stays: the console watch reads from the old size.
func TestCreateConsoleLogKeepsAnExistingLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serial.log")
	if err := os.WriteFile(path, []byte("[    0.000000] Linux version 6.12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := createConsoleLog(path); err != nil {
		t.Fatalf("createConsoleLog = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "[    0.000000] Linux version 6.12\n" {
		t.Errorf("log now holds %q", b)
	}
}

func TestCreateConsoleLogNamesTheFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone", "serial.log")
	err := createConsoleLog(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("createConsoleLog in a missing folder = %v, want an error naming %s", err, path)
	}
}
