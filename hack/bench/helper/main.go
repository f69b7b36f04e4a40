// Command vmdock-bench-helper is the guest side of `vmdock bench`: a static
// linux binary the bench copies into a shared folder and runs in the guest
// (the share has the same path there). Every subcommand prints one JSON
// object on stdout.
//
//	tree   -dir D -n N [-seed S] [-phase P]      small-file phases (one phase: {"secs": s})
//	serve  -addr A [-max D]                      TCP echo until stdin closes
//	echo   -addr A -conns C -rounds R -size B    connect+echo latencies (µs)
//	stream -addr A -bytes N                      echo throughput (seconds)
//	http   -sock S -path P -n N                  GET latencies over a unix socket (µs)
//	grpc   -sock S -n N                          containerd Version call latencies over a unix socket (µs)
//	portscan -conns C -n N                       CPU per port listing, /proc/net vs sock_diag
//	commits -dir D -n N                          N log+commit transactions, 2 fdatasync each (seconds)
//	files                                        await/write requests on stdin, "ok" per line (see probe.ServeFiles)
//	install -tar T -dir D [-phase P]              unpack tarball T into D, read every file (seconds)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/vmdock/vmdock/bench/probe"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "vmdock-bench-helper:", err)
		os.Exit(1)
	}
}

// subcommands is what run accepts, for its error messages.
const subcommands = "tree, serve, echo, stream, download, http, grpc, portscan, commits, files, install"

// helperFlags are the flags every subcommand parses; each uses its own.
type helperFlags struct {
	dir, tarball, addr, sock, path, phase string
	n, conns, rounds, size                int
	seed                                  uint64
	maxLife                               time.Duration
	nbytes                                int64
}

func parseHelperFlags(name string, args []string) (*helperFlags, error) {
	var f helperFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.dir, "dir", "", "tree root (must not exist)")
	fs.IntVar(&f.n, "n", 100, "files (tree), requests (http) or transactions (commits)")
	fs.Uint64Var(&f.seed, "seed", 1, "tree size seed")
	fs.StringVar(&f.tarball, "tar", "", "install: the dependency tarball")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:0", "TCP address (download: the URL)")
	fs.DurationVar(&f.maxLife, "max", 10*time.Minute, "serve: exit after this long")
	fs.IntVar(&f.conns, "conns", 1, "parallel connections")
	fs.IntVar(&f.rounds, "rounds", 20, "rounds per connection")
	fs.IntVar(&f.size, "size", 64, "echo payload bytes")
	fs.Int64Var(&f.nbytes, "bytes", 64<<20, "stream bytes")
	fs.StringVar(&f.sock, "sock", "/var/run/docker.sock", "unix socket")
	fs.StringVar(&f.path, "path", "/_ping", "HTTP path")
	fs.StringVar(&f.phase, "phase", "", "tree, install: run only this phase")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return &f, nil
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("missing subcommand; accepted: %s", subcommands)
	}
	f, err := parseHelperFlags(args[0], args[1:])
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	switch args[0] {
	case "serve":
		return serve(out, f.addr, f.maxLife)
	case "files":
		return probe.ServeFiles(os.Stdin, os.Stdout, 10*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	v, err := measure(ctx, args[0], f)
	if err != nil {
		return err
	}
	return out.Encode(v)
}

// measure runs one of the subcommands that print a single result.
func measure(ctx context.Context, name string, f *helperFlags) (any, error) {
	switch name {
	case "tree":
		if f.phase != "" {
			secs, err := probe.TreePhase(f.dir, f.n, f.seed, f.phase)
			return probe.PhaseTime{Secs: secs}, err
		}
		return probe.Tree(f.dir, f.n, f.seed)
	case "echo":
		lat, err := probe.EchoLatency(ctx, probe.TCPDialer(f.addr), f.conns, f.rounds, f.size)
		return map[string][]int64{"us": micros(lat)}, err
	case "stream":
		d, err := probe.EchoThroughput(ctx, probe.TCPDialer(f.addr), f.nbytes)
		return map[string]float64{"seconds": d.Seconds()}, err
	case "download":
		n, d, err := probe.Download(ctx, f.addr)
		return map[string]float64{"bytes": float64(n), "seconds": d.Seconds()}, err
	case "http":
		lat, err := probe.HTTPLatency(ctx, probe.UnixHTTPClient(f.sock), "http://docker"+f.path, f.n)
		return map[string][]int64{"us": micros(lat)}, err
	case "grpc":
		lat, err := probe.GRPCLatency(ctx, f.sock, probe.ContainerdVersionURL, f.n)
		return map[string][]int64{"us": micros(lat)}, err
	case "install":
		if f.phase != "" {
			secs, err := probe.InstallPhase(f.tarball, f.dir, f.phase)
			return probe.PhaseTime{Secs: secs}, err
		}
		return probe.Install(f.tarball, f.dir)
	case "commits":
		d, err := probe.Commits(f.dir, f.n)
		return map[string]float64{"seconds": d.Seconds()}, err
	case "portscan":
		return portScan(f.conns, f.n)
	}
	return nil, fmt.Errorf("subcommand %q; accepted: %s", name, subcommands)
}

// serve echoes TCP on addr and prints the address it listens on, until
// stdin closes or maxLife passes.
func serve(out *json.Encoder, addr string, maxLife time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go probe.ServeEcho(ln)
	if err := out.Encode(map[string]string{"addr": ln.Addr().String()}); err != nil {
		return err
	}
	// The host ends the server by closing our stdin; the timer is the
	// backstop if the exec stream is lost.
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(maxLife):
	}
	return ln.Close()
}

func micros(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Microseconds()
	}
	return out
}
