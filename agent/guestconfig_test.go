package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeGuestConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.json")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadGuestConfig(t *testing.T) {
	p := writeGuestConfig(t, `{"channel": "virtio-serial", "serialPath": "/dev/vport1p1", "vsockPort": 3000, "logLevel": "warn"}`)
	c, err := LoadGuestConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Channel != ChannelVirtioSerial || c.Serial() != "/dev/vport1p1" || c.Port() != 3000 {
		t.Fatalf("config %+v: serial %s, port %d; want the overrides", c, c.Serial(), c.Port())
	}
	if l, err := c.Level(); err != nil || l != slog.LevelWarn {
		t.Fatalf("Level = %v, %v; want warn", l, err)
	}
}

// The guest agent refuses a config it cannot act on, naming the file.
func TestLoadGuestConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "agent.json")
	if _, err := LoadGuestConfig(missing); err == nil || !strings.Contains(err.Error(), "read agent config") {
		t.Errorf("missing file: %v", err)
	}
	for text, want := range map[string]string{
		`{"channel": `:       "parse agent config",
		`{"channel": 5}`:     "parse agent config",
		`{"channel": "tcp"}`: `channel "tcp"`,
		`{"channel": "vsock", "logLevel": "verbose"}`: `log level "verbose"`,
	} {
		p := writeGuestConfig(t, text)
		_, err := LoadGuestConfig(p)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("LoadGuestConfig(%s) = %v; want %q naming %s", text, err, want, p)
		}
	}
}

func TestGuestConfigLevels(t *testing.T) {
	for name, want := range map[string]slog.Level{
		"": slog.LevelInfo, "info": slog.LevelInfo, "debug": slog.LevelDebug,
		"warn": slog.LevelWarn, "error": slog.LevelError,
	} {
		if l, err := (GuestConfig{LogLevel: name}).Level(); err != nil || l != want {
			t.Errorf("Level(%q) = %v, %v; want %v", name, l, err, want)
		}
	}
	if _, err := (GuestConfig{LogLevel: "WARN"}).Level(); err == nil {
		t.Error("Level(WARN): want an error, levels are lower case")
	}
}
