package main

import (
	"context"
	"log/slog"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest"
)

func serve(ctx context.Context, log *slog.Logger, cfg agent.GuestConfig) error {
	return guest.NewServer(log).Run(ctx, cfg)
}
