//go:build e2e

package e2e

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These need no VM: go test -tags e2e -run 'TestRunChromium|TestWholePNG' ./hack/e2e

// TestRunChromiumEndsOnceWritten: a "chromium" that prints a whole page
// and then hangs (as the real one can on exit) is ended at once, without
// an error, and what it printed is kept.
func TestRunChromiumEndsOnceWritten(t *testing.T) {
	bin := t.TempDir()
	fake := "#!/bin/sh\necho '<html><body>vmdock container domains work</body></html>'\nexec sleep 60\n"
	if err := os.WriteFile(filepath.Join(bin, "chromium"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	e := &env{t: t}
	start := time.Now()
	out, err := runChromium(t, e, t.TempDir(), func(s string) bool { return strings.Contains(s, "</html>") }, "--dump-dom", "http://x/")
	if err != nil || !strings.Contains(out, "domains work") {
		t.Errorf("runChromium: %q, %v; want the page and no error", out, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a hanging chromium was ended only after %s", took)
	}
}

func TestWholePNG(t *testing.T) {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 40, 20))); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	whole, cut := filepath.Join(dir, "whole.png"), filepath.Join(dir, "cut.png")
	must(t, os.WriteFile(whole, b.Bytes(), 0o644))
	must(t, os.WriteFile(cut, b.Bytes()[:b.Len()-4], 0o644))
	if !wholePNG(whole) || wholePNG(cut) || wholePNG(filepath.Join(dir, "missing.png")) {
		t.Errorf("wholePNG: whole %v, cut %v, missing %v; want true, false, false",
			wholePNG(whole), wholePNG(cut), wholePNG(filepath.Join(dir, "missing.png")))
	}
}
