// Command migrate measures `vmdock migrate`'s MB/s against the same
// transfer by hand with the docker CLI, side by side, between two dockerds
// it starts on this Linux host (migratetest's, as root). It moves a volume
// (migrate's helper containers against a `tar c | tar x` container pair)
// and an image (migrate's export and load against `docker save | docker
// load`). Rounds take turns, a hand run then a migrate run, each from an
// empty target; it prints each round's MB/s, the medians as a bench table
// and the ratio migrate/hand, whose target is at least 1.0x.
//
// It needs no VM, which `vmdock bench` does: its sections measure a
// running instance, this one two engines on the host.
//
//	go run ./hack/bench/migrate            quick: a 256 MiB volume, a 100 MB image
//	BENCH_FULL=1 go run ./hack/bench/migrate   a 1 GiB volume, a 300 MB image
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"

	"github.com/vmdock/vmdock/bench"
	"github.com/vmdock/vmdock/migrate/migratetest"
)

// engineDir is the bench engines' folder, apart from the tests' own.
const engineDir = "/tmp/vmdock-migrate-bench"

func main() {
	rounds := flag.Int("rounds", 3, "rounds of each transfer, hand and migrate taking turns")
	flag.Parse()
	if err := run(*rounds, os.Getenv("BENCH_FULL") == "1"); err != nil {
		fmt.Fprintln(os.Stderr, "bench migrate:", err)
		os.Exit(1)
	}
}

func run(rounds int, full bool) error {
	if rounds < 1 {
		return fmt.Errorf("-rounds %d: accepted: 1 or more", rounds)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("the hand transfers need the docker CLI: %w", err)
	}
	sizes := workload{volumeBytes: 256 << 20, imageBytes: 100e6}
	if full {
		sizes = workload{volumeBytes: 1 << 30, imageBytes: 300e6}
	}
	engines, err := migratetest.Start(engineDir, "vmdock-migrate-bench", "src", "dst")
	if err != nil {
		return fmt.Errorf("bench engines: %w", err)
	}
	defer engines.Stop()
	p := pair{src: engines.List[0].Socket, dst: engines.List[1].Socket, work: engineDir}
	slog.Info("filling the source", "volume MiB", sizes.volumeBytes>>20, "image MB", sizes.imageBytes/1e6)
	if err := p.fill(sizes); err != nil {
		return err
	}
	rep := &bench.Report{}
	for _, tr := range p.transfers(sizes) {
		if err := p.measure(context.Background(), rep, tr, rounds); err != nil {
			return err
		}
	}
	rep.ComputeRatios()
	for _, res := range rep.Results {
		if !res.Baseline && res.Ratio > 0 {
			rep.Checks = append(rep.Checks, bench.NewCheck("migrate", res.Metric+" migrate/hand", res.Ratio, 1.0))
		}
	}
	fmt.Printf("\nhost: %s/%s, %d cores; engines: two dockerds (vfs storage) on this host\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	return bench.WriteTable(os.Stdout, rep)
}
