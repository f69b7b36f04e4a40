package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/doctor"
)

// TestDoctorJSON runs every check for real on this host (a Linux one in
// CI): only the report's shape is checked, since what the host has varies.
func TestDoctorJSON(t *testing.T) {
	home, _ := env(t)
	t.Setenv("VMDOCK_CACHE", t.TempDir()) // the accelerator verdict lands here
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	stdout, stderr, err := runSplit("doctor", "--json")
	var ee exitError
	if err != nil && !(errors.As(err, &ee) && ee.code == 1) {
		t.Fatalf("doctor: %v\n%s", err, stderr)
	}
	var r struct {
		Version string `json:"version"`
		Checks  []struct {
			Name    string `json:"name"`
			Status  string `json:"status"`
			Message string `json:"message"`
			Fix     string `json:"fix"`
		} `json:"checks"`
		Summary struct{ OK, Warn, Fail int } `json:"summary"`
	}
	if jerr := json.Unmarshal([]byte(stdout), &r); jerr != nil {
		t.Fatalf("doctor --json printed no JSON (%v):\n%s", jerr, stdout)
	}
	if r.Version != Version {
		t.Errorf("version = %q", r.Version)
	}
	names := map[string]bool{}
	for _, c := range r.Checks {
		names[c.Name] = true
		if c.Message == "" || (c.Status != "ok" && c.Status != "warn" && c.Status != "fail") || (c.Status != "ok" && c.Fix == "") {
			t.Errorf("check %+v", c)
		}
	}
	for _, n := range doctor.Names() {
		if !names[n] {
			t.Errorf("no %q check in %s", n, stdout)
		}
	}
	if r.Summary.OK+r.Summary.Warn+r.Summary.Fail != len(doctor.Names()) || (r.Summary.Fail > 0) != (err != nil) {
		t.Errorf("summary %+v with err %v", r.Summary, err)
	}
	if _, serr := os.Stat(filepath.Join(home, "default")); serr == nil {
		t.Error("doctor created the instance folder")
	}
}

// A broken instance makes doctor fail; the text report is a table.
func TestDoctorTextFailsOnABrokenInstance(t *testing.T) {
	home, _ := env(t)
	t.Setenv("VMDOCK_CACHE", t.TempDir())
	installFake(t)
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "default")
	if err := os.WriteFile(filepath.Join(dir, "broken"), []byte("the VM exited: kernel panic\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run("doctor")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("doctor on a broken instance: err %v\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "instance ") {
			line = l
		}
	}
	if !strings.Contains(line, "fail") || !strings.Contains(line, "kernel panic") || !strings.Contains(line, "vmdock logs hostagent") {
		t.Errorf("instance line = %q in\n%s", line, out)
	}
	if !strings.Contains(out, "saved config "+filepath.Join(dir, "vmdock.yaml")) {
		t.Errorf("the config row does not name the saved config:\n%s", out)
	}
}
