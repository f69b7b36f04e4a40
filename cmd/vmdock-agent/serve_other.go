//go:build !linux

package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/vmdock/vmdock/agent"
)

// The agent runs only inside the Linux guest; this keeps `go build ./...`
// working on macOS hosts.
func serve(context.Context, *slog.Logger, agent.GuestConfig) error {
	return errors.New("vmdock-agent runs only on linux (inside the VM)")
}
