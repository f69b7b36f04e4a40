package vz

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLogPlanWarningsOneLineEach(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	logPlanWarnings("dev", &VMPlan{Warnings: []string{"first warning", "second warning"}})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "first warning") || !strings.Contains(lines[1], "second warning") || !strings.Contains(lines[0], "name=dev") {
		t.Errorf("logged:\n%s", buf.String())
	}
}
