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

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("missing subcommand; accepted: tree, serve, echo, stream, http, portscan, commits, files, install")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dir := fs.String("dir", "", "tree root (must not exist)")
	n := fs.Int("n", 100, "files (tree), requests (http) or transactions (commits)")
	seed := fs.Uint64("seed", 1, "tree size seed")
	tarball := fs.String("tar", "", "install: the dependency tarball")
	addr := fs.String("addr", "127.0.0.1:0", "TCP address")
	maxLife := fs.Duration("max", 10*time.Minute, "serve: exit after this long")
	conns := fs.Int("conns", 1, "parallel connections")
	rounds := fs.Int("rounds", 20, "rounds per connection")
	size := fs.Int("size", 64, "echo payload bytes")
	nbytes := fs.Int64("bytes", 64<<20, "stream bytes")
	sock := fs.String("sock", "/var/run/docker.sock", "unix socket")
	path := fs.String("path", "/_ping", "HTTP path")
	phase := fs.String("phase", "", "tree, install: run only this phase")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := json.NewEncoder(os.Stdout)
	switch args[0] {
	case "tree":
		if *phase != "" {
			secs, err := probe.TreePhase(*dir, *n, *seed, *phase)
			if err != nil {
				return err
			}
			return out.Encode(probe.PhaseTime{Secs: secs})
		}
		t, err := probe.Tree(*dir, *n, *seed)
		if err != nil {
			return err
		}
		return out.Encode(t)
	case "serve":
		ln, err := net.Listen("tcp", *addr)
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
		case <-time.After(*maxLife):
		}
		return ln.Close()
	case "echo":
		lat, err := probe.EchoLatency(ctx, probe.TCPDialer(*addr), *conns, *rounds, *size)
		if err != nil {
			return err
		}
		return out.Encode(map[string][]int64{"us": micros(lat)})
	case "stream":
		d, err := probe.EchoThroughput(ctx, probe.TCPDialer(*addr), *nbytes)
		if err != nil {
			return err
		}
		return out.Encode(map[string]float64{"seconds": d.Seconds()})
	case "http":
		lat, err := probe.HTTPLatency(ctx, probe.UnixHTTPClient(*sock), "http://docker"+*path, *n)
		if err != nil {
			return err
		}
		return out.Encode(map[string][]int64{"us": micros(lat)})
	case "grpc":
		lat, err := probe.GRPCLatency(ctx, *sock, probe.ContainerdVersionURL, *n)
		if err != nil {
			return err
		}
		return out.Encode(map[string][]int64{"us": micros(lat)})
	case "install":
		if *phase != "" {
			secs, err := probe.InstallPhase(*tarball, *dir, *phase)
			if err != nil {
				return err
			}
			return out.Encode(probe.PhaseTime{Secs: secs})
		}
		t, err := probe.Install(*tarball, *dir)
		if err != nil {
			return err
		}
		return out.Encode(t)
	case "files":
		return probe.ServeFiles(os.Stdin, os.Stdout, 10*time.Second)
	case "commits":
		d, err := probe.Commits(*dir, *n)
		if err != nil {
			return err
		}
		return out.Encode(map[string]float64{"seconds": d.Seconds()})
	case "portscan":
		cost, err := portScan(*conns, *n)
		if err != nil {
			return err
		}
		return out.Encode(cost)
	}
	return fmt.Errorf("subcommand %q; accepted: tree, serve, echo, stream, http, portscan, commits, files, install", args[0])
}

func micros(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Microseconds()
	}
	return out
}
