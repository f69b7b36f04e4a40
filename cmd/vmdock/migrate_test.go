package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/migrate"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
)

func TestMigrateRefusesATargetItCannotFill(t *testing.T) {
	env(t)
	installFake(t)
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	// The fake start leaves no host agent: the instance is not running.
	_, err := run("migrate", "--from", "unix:///run/elsewhere.sock")
	if err == nil || !strings.Contains(err.Error(), `profile "default" is not running`) {
		t.Errorf("stopped target: %v", err)
	}
	if _, err := run("start", "-p", "ctr", "--runtime", "containerd"); err != nil {
		t.Fatal(err)
	}
	_, err = run("migrate", "-p", "ctr", "--from", "unix:///run/elsewhere.sock")
	if err == nil || !strings.Contains(err.Error(), "containerd runtime") {
		t.Errorf("containerd target: %v", err)
	}
	_, err = run("migrate", "-p", "nosuch", "--from", "x")
	if err == nil || !strings.Contains(err.Error(), `profile "nosuch" does not exist`) {
		t.Errorf("unknown profile: %v", err)
	}
}

func TestMigrateBindsOnlyInsideShares(t *testing.T) {
	home := t.TempDir()
	cfg := config.Config{Mounts: []mounts.Mount{{Location: home, GuestPath: home}}}
	allowed := bindAllowed(cfg)
	for path, want := range map[string]bool{
		home: true, filepath.Join(home, "src"): true, home + "x": false, "/etc": false, filepath.Dir(home): false,
		"/var/run/docker.sock": true,
	} {
		if got := allowed(path); got != want {
			t.Errorf("bindAllowed(%s) = %v, want %v", path, got, want)
		}
	}
}

func TestMigrateSummary(t *testing.T) {
	var buf bytes.Buffer
	printSummary(&buf, migrate.Report{Items: []migrate.Item{{Kind: "image", Name: "a", Result: migrate.Present}}}, false)
	if got := buf.String(); got != "nothing to do: everything is already on the target\n" {
		t.Errorf("nothing moved: %q", got)
	}
	buf.Reset()
	printSummary(&buf, migrate.Report{Items: []migrate.Item{
		{Kind: "volume", Name: "v", Result: migrate.Copied, Bytes: 3 << 20},
		{Kind: "container", Name: "c", Result: migrate.Failed, Detail: "x"},
	}}, false)
	if got := buf.String(); got != "moved 1 (3.0 MiB), 0 already there, 0 skipped, 1 failed\n" {
		t.Errorf("summary: %q", got)
	}
}

func TestMigrateProgress(t *testing.T) {
	var buf bytes.Buffer
	p := printProgress(&buf)
	p(migrate.Event{Kind: "volume", Name: "db", Index: 2, Total: 3})
	p(migrate.Event{Kind: "volume", Name: "db", Index: 2, Total: 3, Bytes: 4 << 20})
	p(migrate.Event{Kind: "volume", Name: "db", Index: 2, Total: 3, Bytes: 300 << 20})
	p(migrate.Event{Kind: "volume", Name: "db", Index: 2, Total: 3, Bytes: 310 << 20, Result: migrate.Copied})
	p(migrate.Event{Kind: "container", Name: "web", Index: 1, Total: 1, Result: migrate.Failed, Detail: "it binds /srv"})
	want := "[2/3] volume db: 300.0 MiB so far\n" +
		"[2/3] volume db: copied (310.0 MiB)\n" +
		"[1/1] container web: failed (it binds /srv)\n"
	if got := buf.String(); got != want {
		t.Errorf("progress:\n%s\nwant:\n%s", got, want)
	}
}

// TestMigrateEscapesEngineText: names and error text from a source reach
// the terminal with their controls escaped, and the JSON holds the same
// strings with nothing a terminal acts on.
func TestMigrateEscapesEngineText(t *testing.T) {
	name := "app\x1b[2J\x1b]52;c;ZXZpbA==\a\u009b31m\u202eevil"
	var buf bytes.Buffer
	p := printProgress(&buf)
	p(migrate.Event{Kind: "container", Name: name, Index: 1, Total: 1, Result: migrate.Failed, Detail: "engine answered 500: \x1b[31mred\xff"})
	p(migrate.Event{Kind: "volume", Name: name, Index: 1, Total: 1, Result: migrate.Copied, Bytes: 5})
	got := buf.String()
	want := `[1/1] container app\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m\u202eevil: failed (engine answered 500: \x1b[31mred\xff)` + "\n" +
		`[1/1] volume app\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m\u202eevil: copied (5 B)` + "\n"
	if got != want {
		t.Errorf("progress:\n%q\nwant:\n%q", got, want)
	}
	err := termSafeError{fmt.Errorf("wrap: %w", errors.New("boom\x1b[H"))}
	if err.Error() != `wrap: boom\x1b[H` || !errors.Is(err, errors.Unwrap(err.err)) {
		t.Errorf("termSafeError = %q", err.Error())
	}
	b, _ := json.Marshal(migrateJSONOf(migrate.Report{Items: []migrate.Item{{Kind: "volume", Name: name, Result: migrate.Copied}}}))
	safe := termSafeJSON(b)
	if bytes.ContainsAny(safe, "\x1b\a\u009b\u202e\x7f") {
		t.Errorf("JSON holds raw controls: %q", safe)
	}
	var back migrateJSON
	if err := json.Unmarshal(safe, &back); err != nil || back.Items[0].Name != name {
		t.Errorf("JSON read back: %v %+v", err, back.Items)
	}
}

func TestParseDfAvailable(t *testing.T) {
	out := "Filesystem     1024-blocks    Used Available Capacity Mounted on\n/dev/vdb        61611820 9876543  48579744      17% /var/lib/docker\n"
	if n, err := parseDfAvailable(out); err != nil || n != 48579744<<10 {
		t.Errorf("parseDfAvailable = %d, %v", n, err)
	}
	if _, err := parseDfAvailable("df: /var/lib/docker: No such file"); err == nil {
		t.Error("a df error was read as a size")
	}
}
