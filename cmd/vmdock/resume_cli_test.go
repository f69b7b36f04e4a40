package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartColdDropsTheSavedState(t *testing.T) {
	home, _ := env(t)
	installFake(t)
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(home, "default", "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "state.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run("start", "--cold")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "booting cold (--cold)") {
		t.Errorf("start --cold said %q", out)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state folder after start --cold: %v", err)
	}
}

func TestResumeSettingAndStopNoSave(t *testing.T) {
	_, _ = env(t)
	f := installFake(t)
	if _, err := run("start", "--resume=false"); err != nil {
		t.Fatal(err)
	}
	if f.starts[0].Resume {
		t.Error("start --resume=false saved resume: true")
	}
	if _, err := run("start"); err != nil {
		t.Fatal(err)
	}
	if f.starts[1].Resume {
		t.Error("resume: false did not stick in the config")
	}
	if _, err := run("stop", "--no-save"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("stop"); err != nil {
		t.Fatal(err)
	}
	if len(f.noSave) != 2 || !f.noSave[0] || f.noSave[1] {
		t.Errorf("stop --no-save, stop: NoSave %v, want [true false]", f.noSave)
	}
}
