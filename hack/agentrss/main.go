//go:build linux

// Command agentrss runs the guest agent binary on this host over a raw pty
// (standing in for virtio-serial), drives it as a host agent would at idle
// (handshake, info, port watch) and with forwarded streams, and prints its
// memory from /proc: a quick loop for tuning the agent's footprint without
// booting a VM. The numbers that count come from `make bench` in the guest.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/vmdock/vmdock/agent"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "agentrss:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("agent", "bin/vmdock-agent-linux-amd64", "guest agent binary")
	idle := flag.Duration("idle", 20*time.Second, "how long to sit idle before sampling")
	streams := flag.Int("streams", 8, "parallel forwarded streams for the load sample (0: none)")
	flag.Parse()

	master, cmd, cleanup, err := startAgent(*bin)
	if err != nil {
		return err
	}
	defer cleanup()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := agent.ConnectLogger(ctx, fileConn{master}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if _, err := c.Info(ctx); err != nil {
		return fmt.Errorf("info: %w", err)
	}
	if _, err := c.WatchPorts(ctx); err != nil {
		return fmt.Errorf("watch ports: %w", err)
	}
	time.Sleep(*idle)
	fmt.Println("idle:", memory(cmd.Process.Pid))
	if *streams == 0 {
		return nil
	}
	peak, err := loadSample(ctx, c, cmd.Process.Pid, *streams)
	if err != nil {
		return err
	}
	fmt.Println("load (last sample):", peak)
	time.Sleep(*idle)
	fmt.Println("idle after load:", memory(cmd.Process.Pid))
	return nil
}

// startAgent starts the guest agent binary bin on a raw pty, which
// stands in for its virtio-serial port, and returns the pty's host side,
// the agent's process and what stops it and removes its files.
func startAgent(bin string) (*os.File, *exec.Cmd, func(), error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open pty: %w", err)
	}
	fail := func(err error) (*os.File, *exec.Cmd, func(), error) {
		master.Close()
		return nil, nil, nil, err
	}
	if _, err := term.MakeRaw(int(slave.Fd())); err != nil {
		return fail(fmt.Errorf("raw pty: %w", err))
	}
	dir, err := os.MkdirTemp("", "agentrss")
	if err != nil {
		return fail(err)
	}
	cfgPath := filepath.Join(dir, "agent.json")
	cfg, _ := json.Marshal(agent.GuestConfig{Channel: agent.ChannelVirtioSerial, SerialPath: slave.Name(), LogLevel: "warn"})
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return fail(fmt.Errorf("start %s: %w", bin, err))
	}
	cleanup := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
		master.Close()
	}
	return master, cmd, cleanup, nil
}

// loadSample sends 8 MiB down each of streams forwarded streams at once
// to a local sink and returns the agent's memory last sampled meanwhile.
func loadSample(ctx context.Context, c *agent.Client, pid, streams int) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	var wg sync.WaitGroup
	peak := ""
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				peak = memory(pid)
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.Dial(ctx, "tcp", ln.Addr().String())
			if err != nil {
				fmt.Fprintln(os.Stderr, "dial:", err)
				return
			}
			defer conn.Close()
			for n := 0; n < 8<<20; n += len(buf) {
				if _, err := conn.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	return peak, nil
}

func memory(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		for _, k := range []string{"VmRSS", "RssAnon", "RssFile", "VmHWM"} {
			if strings.HasPrefix(line, k+":") {
				out = append(out, strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return strings.Join(out, ", ")
}

// fileConn makes the pty master a net.Conn for agent.Connect.
type fileConn struct{ *os.File }

func (fileConn) LocalAddr() net.Addr             { return ptyAddr{} }
func (fileConn) RemoteAddr() net.Addr            { return ptyAddr{} }
func (f fileConn) SetDeadline(t time.Time) error { return f.File.SetDeadline(t) }

type ptyAddr struct{}

func (ptyAddr) Network() string { return "pty" }
func (ptyAddr) String() string  { return "pty" }
