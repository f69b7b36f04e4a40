package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// heapDumpPath is where SIGUSR1 leaves the agent's heap profile (pprof's
// text form, ending with runtime.MemStats): the guest agent has no socket
// of its own to serve one, and its memory is worth reading in a real guest.
const heapDumpPath = "/run/vmdock/agent-heap.txt"

// dumpHeapOnSignal writes the heap profile to path on each SIGUSR1 until
// ctx ends.
func dumpHeapOnSignal(ctx context.Context, log *slog.Logger, path string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	defer signal.Stop(sig)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			if err := writeHeapProfile(path); err != nil {
				log.Warn("heap profile", "err", err)
			}
		}
	}
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write heap profile %s: %w", path, err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 1); err != nil {
		f.Close()
		return fmt.Errorf("write heap profile %s: %w", path, err)
	}
	return f.Close()
}
