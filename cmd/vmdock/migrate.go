package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/dockerhost/dockerctx"
	"github.com/vmdock/vmdock/migrate"
	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/instance"
)

// migrateFlags are `vmdock migrate`'s flags.
type migrateFlags struct {
	from                        string
	images, volumes, containers bool
	dryRun, json, stopSource    bool
	overwrite, allowPrivileged  bool
}

func newMigrateCmd(g *globals) *cobra.Command {
	var f migrateFlags
	cmd := &cobra.Command{
		Use:   "migrate --from CONTEXT|unix://PATH [--images] [--volumes] [--containers]",
		Short: "Bring images, volumes and containers from another Docker engine into this instance",
		Long: "Copies every tagged image, every named volume's files and every container (created\n" +
			"again, stopped) from another engine (Docker Desktop, Colima, any engine on a unix\n" +
			"socket) into the running instance of the profile. Without --images, --volumes or\n" +
			"--containers it moves all three. The source is left as it was; a second run copies\n" +
			"only what is missing.",
		Example: `  vmdock migrate --from desktop-linux --dry-run
  vmdock migrate --from colima --volumes --stop-source
  vmdock migrate --from unix://$HOME/.docker/run/docker.sock --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMigrate(cmd, g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "the engine to move from: a docker context name or unix://PATH")
	fl.BoolVar(&f.images, "images", false, "move tagged images")
	fl.BoolVar(&f.volumes, "volumes", false, "move named volumes and their files")
	fl.BoolVar(&f.containers, "containers", false, "create the containers again, stopped")
	fl.BoolVar(&f.dryRun, "dry-run", false, "list what would move, change nothing")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON")
	fl.BoolVar(&f.stopSource, "stop-source", false, "stop running source containers while their volumes are copied, then start them again")
	fl.BoolVar(&f.overwrite, "overwrite", false, "replace target volumes with other contents and tags naming other images")
	fl.BoolVar(&f.allowPrivileged, "allow-privileged", false, "also recreate privileged containers, and those with devices, host namespaces, added capabilities or confinement off")
	return cmd
}

func runMigrate(cmd *cobra.Command, g *globals, f migrateFlags) error {
	inst, cfg, err := g.existingConfig()
	if err != nil {
		return err
	}
	running := instance.Status(cmd.Context(), inst).State == instance.StateRunning
	if err := migrate.CheckTarget(inst.Name, cfg.Runtime, running); err != nil {
		return err
	}
	contexts, err := dockerctx.Default()
	if err != nil {
		return err
	}
	sock, err := migrate.ResolveSource(f.from, contexts.Endpoint, dockerctx.Name(inst.Name), inst.DockerSocketPath())
	if err != nil {
		return err
	}
	source, target := migrate.NewEngine(sock), migrate.NewEngine(inst.DockerSocketPath())
	if err := source.Ping(cmd.Context()); err != nil {
		return fmt.Errorf("source %s does not answer: %w", termSafe(f.from), termSafeError{err})
	}
	if err := target.Ping(cmd.Context()); err != nil {
		return fmt.Errorf("profile %q's docker engine does not answer: %w", inst.Name, err)
	}
	opts := migrate.Options{
		Source: source, Target: target,
		Images: f.images, Volumes: f.volumes, Containers: f.containers,
		DryRun: f.dryRun, StopSource: f.stopSource, Overwrite: f.overwrite, AllowPrivileged: f.allowPrivileged,
		RecordPath:  inst.MigrateRecordPath(),
		BindAllowed: bindAllowed(cfg),
		TargetFree:  guestFree(inst),
	}
	if !f.json {
		opts.Progress = printProgress(cmd.ErrOrStderr())
	}
	report, runErr := migrate.Run(cmd.Context(), opts)
	if f.json {
		b, err := json.MarshalIndent(migrateJSONOf(report), "", "  ")
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\n", termSafeJSON(b)); err != nil {
			return err
		}
	} else {
		printSummary(cmd.OutOrStdout(), report, f.dryRun)
	}
	if runErr != nil {
		return fmt.Errorf("migrate from %s: %w", termSafe(f.from), termSafeError{runErr})
	}
	if n := report.Count(migrate.Failed); n > 0 {
		return fmt.Errorf("%d item(s) could not move; run again after fixing them, the rest is kept", n)
	}
	return nil
}

// migrateJSON is `vmdock migrate --json`: every item, then the totals.
type migrateJSON struct {
	Items   []migrate.Item `json:"items"`
	Copied  int            `json:"copied"`
	Present int            `json:"present"`
	Planned int            `json:"planned"`
	Skipped int            `json:"skipped"`
	Failed  int            `json:"failed"`
	Bytes   int64          `json:"bytes"`
}

func migrateJSONOf(r migrate.Report) migrateJSON {
	items := r.Items
	if items == nil {
		items = []migrate.Item{}
	}
	return migrateJSON{
		Items: items, Copied: r.Count(migrate.Copied), Present: r.Count(migrate.Present), Planned: r.Count(migrate.Planned),
		Skipped: r.Count(migrate.Skipped), Failed: r.Count(migrate.Failed), Bytes: r.Bytes(),
	}
}

// bindAllowed says whether a container's bind of path can work in the
// guest: the folder must be under a share or sync mount, which the guest
// sees at its guest path, or be the docker socket.
func bindAllowed(cfg config.Config) func(string) bool {
	var roots []string
	for _, sh := range mounts.Shares(cfg.Mounts, cfg.MountType) {
		roots = append(roots, sh.GuestPath)
	}
	for _, sy := range mounts.Syncs(cfg.Mounts) {
		roots = append(roots, sy.GuestPath)
	}
	return func(path string) bool {
		// The guest's own engine socket is where a container that drives
		// docker expects it.
		if path == "/var/run/docker.sock" || path == "/run/docker.sock" {
			return true
		}
		for _, r := range roots {
			rel, err := filepath.Rel(r, path)
			if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return true
			}
		}
		return false
	}
}

// printProgress prints each item as it ends, and the bytes of a long one
// every 256 MiB as they move.
func printProgress(w io.Writer) func(migrate.Event) {
	const every = 256 << 20
	var shown int64
	return func(ev migrate.Event) {
		pos := ""
		if ev.Total > 0 {
			pos = fmt.Sprintf("[%d/%d] ", ev.Index, ev.Total)
		}
		name := termSafe(ev.Name)
		switch {
		case ev.Result != "" && ev.Detail != "":
			fmt.Fprintf(w, "%s%s %s: %s (%s)\n", pos, ev.Kind, name, ev.Result, termSafe(ev.Detail))
		case ev.Result != "":
			fmt.Fprintf(w, "%s%s %s: %s%s\n", pos, ev.Kind, name, ev.Result, sizeNote(ev.Bytes))
		case ev.Bytes == 0:
			shown = 0
		case ev.Bytes >= shown+every:
			shown = ev.Bytes
			fmt.Fprintf(w, "%s%s %s: %s so far\n", pos, ev.Kind, name, humanBytes(ev.Bytes))
		}
	}
}

func sizeNote(n int64) string {
	if n == 0 {
		return ""
	}
	return " (" + humanBytes(n) + ")"
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// printSummary is the last lines of a run.
func printSummary(w io.Writer, r migrate.Report, dryRun bool) {
	moved, planned := r.Count(migrate.Copied), r.Count(migrate.Planned)
	if moved == 0 && planned == 0 && r.Count(migrate.Failed) == 0 && r.Count(migrate.Skipped) == 0 {
		fmt.Fprintln(w, "nothing to do: everything is already on the target")
		return
	}
	if dryRun {
		fmt.Fprintf(w, "dry run: %d to move, %d already there, %d skipped, %d failing\n", planned, r.Count(migrate.Present), r.Count(migrate.Skipped), r.Count(migrate.Failed))
		return
	}
	fmt.Fprintf(w, "moved %d (%s), %d already there, %d skipped, %d failed\n", moved, humanBytes(r.Bytes()), r.Count(migrate.Present), r.Count(migrate.Skipped), r.Count(migrate.Failed))
}
