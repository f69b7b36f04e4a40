// Command vmdock-agent is the guest agent: started by systemd in the VM with
// --config pointing at agent.json from the boot disk, it serves the host
// agent over virtio-serial or vsock.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/remotehelper"
	"github.com/vmdock/vmdock/internal/memtrim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vmdock-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "remote" {
		// Started over ssh on a remote instance's server (vm/remote).
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		return remotehelper.Main(ctx, os.Args[2:])
	}
	config := flag.String("config", "", "path to agent.json")
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println(agent.Version)
		return nil
	}
	if *config == "" {
		return errors.New("--config is required (path to agent.json)")
	}
	cfg, err := agent.LoadGuestConfig(*config)
	if err != nil {
		return err
	}
	level, _ := cfg.Level() // validated by LoadGuestConfig
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log.Info("vmdock-agent starting", "version", agent.Version, "channel", cfg.Channel)
	if err := memtrim.NoHugePages(); err != nil {
		log.Debug("transparent huge pages stay on", "err", err)
	}
	go dumpHeapOnSignal(ctx, log, heapDumpPath)
	err = serve(ctx, log, cfg)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
