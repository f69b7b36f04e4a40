package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vmdock/vmdock/bench"
	"github.com/vmdock/vmdock/migrate"
	"github.com/vmdock/vmdock/migrate/migratetest"
)

// workload is how much each transfer moves.
type workload struct {
	volumeBytes int64
	imageBytes  int64
}

// blobBytes is the size of each file in the bench volume.
const blobBytes = 64 << 20

// pair is the two engines, by socket, and a folder for scratch files.
type pair struct {
	src, dst string
	work     string
}

// docker runs the docker CLI on the engine at sock.
func docker(sock string, args ...string) error {
	out, err := exec.Command("docker", append([]string{"-H", "unix://" + sock}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dockerFrom runs the docker CLI on sock with in as its standard input.
func dockerFrom(in io.Reader, sock string, args ...string) error {
	cmd := exec.Command("docker", append([]string{"-H", "unix://" + sock}, args...)...)
	cmd.Stdin = in
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// fill gives both engines busybox (for the tar pair; migrate's helpers
// use it too) and the source the bench volume and image, of random
// bytes, so no layer of compression flatters either side.
func (p pair) fill(w workload) error {
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return fmt.Errorf("busybox-static (hack/deps.sh) makes the busybox image: %w", err)
	}
	archive, err := migratetest.ImageTar(map[string][]byte{"bin/busybox": bb, "bin/sh": bb, "bin/tar": bb})
	if err != nil {
		return err
	}
	for _, sock := range []string{p.src, p.dst} {
		if err := dockerFrom(bytes.NewReader(archive), sock, "import", "-", "busybox:latest"); err != nil {
			return err
		}
	}
	if err := p.fillVolume(w.volumeBytes); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeRandomImage(pw, bb, w.imageBytes)) }()
	return dockerFrom(pr, p.src, "import", "-", "bench/big:1")
}

func (p pair) fillVolume(size int64) error {
	if err := docker(p.src, "create", "--name", "benchfill", "--network", "none", "-v", "benchvol:/v", "busybox", "true"); err != nil {
		return err
	}
	defer docker(p.src, "rm", "benchfill")
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(migratetest.WriteVolumeTree(pw, "v", int(size/blobBytes), blobBytes))
	}()
	return dockerFrom(pr, p.src, "cp", "-a", "-", "benchfill:/")
}

// writeRandomImage writes an import tar of busybox and size bytes of
// random files.
func writeRandomImage(w io.Writer, busybox []byte, size int64) error {
	files := map[string][]byte{"bin/busybox": busybox}
	rng := rand.NewChaCha8([32]byte{7})
	const chunk = 50e6
	for i := 0; int64(i)*chunk < size; i++ {
		data := make([]byte, min(chunk, size-int64(i)*chunk))
		_, _ = rng.Read(data)
		files[fmt.Sprintf("data/f%02d", i)] = data
	}
	archive, err := migratetest.ImageTar(files)
	if err != nil {
		return err
	}
	_, err = w.Write(archive)
	return err
}

// transfer is one thing moved both ways: by hand and by migrate, each
// from a target without it.
type transfer struct {
	metric  string
	bytes   int64
	clear   func() error // removes it from the target
	hand    func() error
	migrate func(ctx context.Context) error
	// fingerprint is what must be the same on both engines after a
	// transfer (a hash of the volume's files, the image's ID), so a way
	// that moved less does not pass for fast.
	fingerprint func(sock string) (string, error)
}

// dockerOut runs the docker CLI on sock and returns its trimmed output.
func dockerOut(sock string, args ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"-H", "unix://" + sock}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("docker %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (p pair) transfers(w workload) []transfer {
	opts := func(images, volumes bool) migrate.Options {
		return migrate.Options{Source: migrate.NewEngine(p.src), Target: migrate.NewEngine(p.dst), Images: images, Volumes: volumes,
			RecordPath: filepath.Join(p.work, fmt.Sprintf("record-%d.json", time.Now().UnixNano()))}
	}
	runMigrate := func(ctx context.Context, o migrate.Options) error {
		rep, err := migrate.Run(ctx, o)
		if err == nil && rep.Count(migrate.Copied) != 1 {
			err = fmt.Errorf("migrate copied %d items, want 1: %+v", rep.Count(migrate.Copied), rep.Items)
		}
		return err
	}
	return []transfer{
		{
			metric: fmt.Sprintf("volume %d MiB", w.volumeBytes>>20), bytes: w.volumeBytes,
			clear: func() error { return docker(p.dst, "volume", "rm", "-f", "benchvol") },
			hand: func() error {
				return pipe([]string{"-H", "unix://" + p.src, "run", "--rm", "--network", "none", "-v", "benchvol:/v", "busybox", "tar", "c", "-C", "/v", "."},
					[]string{"-H", "unix://" + p.dst, "run", "--rm", "-i", "--network", "none", "-v", "benchvol:/v", "busybox", "tar", "x", "-C", "/v"})
			},
			migrate: func(ctx context.Context) error { return runMigrate(ctx, opts(false, true)) },
			fingerprint: func(sock string) (string, error) {
				return dockerOut(sock, "run", "--rm", "--network", "none", "-v", "benchvol:/v", "busybox", "sh", "-c",
					"cd /v && find . | sort | while read -r f; do stat -c '%n %a %u %s %N' \"$f\"; done | sha256sum; find . -type f | sort | xargs cat | sha256sum")
			},
		},
		{
			metric: fmt.Sprintf("image %d MB", w.imageBytes/1e6), bytes: w.imageBytes,
			clear: func() error { return docker(p.dst, "image", "rm", "-f", "bench/big:1") },
			hand: func() error {
				return pipe([]string{"-H", "unix://" + p.src, "save", "bench/big:1"}, []string{"-H", "unix://" + p.dst, "load", "-q"})
			},
			migrate: func(ctx context.Context) error { return runMigrate(ctx, opts(true, false)) },
			fingerprint: func(sock string) (string, error) {
				return dockerOut(sock, "image", "inspect", "-f", "{{.Id}} {{.RootFS.Layers}}", "bench/big:1")
			},
		},
	}
}

// pipe runs `docker from... | docker to...` and waits for both.
func pipe(from, to []string) error {
	a, b := exec.Command("docker", from...), exec.Command("docker", to...)
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	var aErr, bErr strings.Builder
	a.Stdout, a.Stderr, b.Stdin, b.Stderr, b.Stdout = w, &aErr, r, &bErr, io.Discard
	if err := a.Start(); err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		_ = a.Process.Kill()
		_ = a.Wait()
		return err
	}
	w.Close()
	r.Close()
	if err := a.Wait(); err != nil {
		_ = b.Wait()
		return fmt.Errorf("docker %s: %w: %s", strings.Join(from, " "), err, aErr.String())
	}
	if err := b.Wait(); err != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(to, " "), err, bErr.String())
	}
	return nil
}

// measure runs tr's rounds, hand then migrate in each, printing every
// MB/s, and adds the medians to rep (hand first: the baseline).
func (p pair) measure(ctx context.Context, rep *bench.Report, tr transfer, rounds int) error {
	want, err := tr.fingerprint(p.src)
	if err != nil {
		return err
	}
	slog.Info("the source's fingerprint, checked on the target after each way's first round", "what", tr.metric, "fingerprint", want)
	var hand, mig []float64
	for round := 1; round <= rounds; round++ {
		for _, way := range []struct {
			name string
			run  func() error
			into *[]float64
		}{{"hand", tr.hand, &hand}, {"migrate", func() error { return tr.migrate(ctx) }, &mig}} {
			if err := tr.clear(); err != nil {
				return err
			}
			began := time.Now()
			if err := way.run(); err != nil {
				return fmt.Errorf("%s by %s: %w", tr.metric, way.name, err)
			}
			mbs := float64(tr.bytes) / 1e6 / time.Since(began).Seconds()
			*way.into = append(*way.into, mbs)
			if round == 1 {
				if got, err := tr.fingerprint(p.dst); err != nil || got != want {
					return fmt.Errorf("%s by %s: the target holds %q (%v), the source %q", tr.metric, way.name, got, err, want)
				}
			}
			fmt.Printf("round %d  %-16s %-8s %7.1f MB/s\n", round, tr.metric, way.name, mbs)
		}
	}
	rep.Add(bench.Result{Section: "migrate", Metric: tr.metric, Variant: "by hand (docker CLI)", Value: median(hand), Unit: "MB/s", Better: bench.Higher})
	rep.Add(bench.Result{Section: "migrate", Metric: tr.metric, Variant: "vmdock migrate", Value: median(mig), Unit: "MB/s", Better: bench.Higher})
	return nil
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
