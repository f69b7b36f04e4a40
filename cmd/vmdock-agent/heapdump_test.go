package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteHeapProfileHasMemStats(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.txt")
	if err := writeHeapProfile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "# HeapInuse = ") {
		t.Fatalf("profile %d bytes without HeapInuse: %v", len(b), err)
	}
	if err := writeHeapProfile(filepath.Join(t.TempDir(), "missing", "heap.txt")); err == nil {
		t.Error("no error for a folder that does not exist")
	}
}
