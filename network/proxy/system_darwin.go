package proxy

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

// System reads macOS's proxy settings through scutil.
func System() (Settings, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scutil", "--proxy").Output()
	if err != nil {
		return Settings{}, "", fmt.Errorf("scutil --proxy: %w", err)
	}
	return ParseScutil(string(out))
}
