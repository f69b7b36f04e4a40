package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vmdock/vmdock/agent/portlist"
)

// scanCost is what one listing of the guest's ports costs the process
// that does it, averaged over many scans.
type scanCost struct {
	CPUms  float64 `json:"cpuMs"`  // user+system CPU per scan
	WallMs float64 `json:"wallMs"` // elapsed per scan
}

// portScanResult is both sources' cost and how many sockets the guest had
// (/proc/net prints every one, TIME_WAIT included, on every scan).
type portScanResult struct {
	Sockets  int      `json:"sockets"`
	ProcNet  scanCost `json:"procnet"`
	SockDiag scanCost `json:"sockdiag"`
}

// portScan measures both port-list sources side by side, with conns
// established loopback connections open (a dev stack's database pools and
// keep-alives).
func portScan(conns, scans int) (*portScanResult, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return nil, fmt.Errorf("connection %d of %d: %w", i+1, conns, err)
		}
		s, err := ln.Accept()
		if err != nil {
			c.Close()
			return nil, err
		}
		open = append(open, c, s)
	}
	out := &portScanResult{}
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := os.ReadFile(filepath.Join("/proc/net", f))
		if err == nil && bytes.Count(b, []byte("\n")) > 0 {
			out.Sockets += bytes.Count(b, []byte("\n")) - 1 // minus the header
		}
	}
	for _, src := range []struct {
		name string
		list func() ([]portlist.Port, error)
		cost *scanCost
	}{
		{"procnet", func() ([]portlist.Port, error) { return portlist.ProcNet("/proc/net") }, &out.ProcNet},
		{"sockdiag", portlist.SockDiag, &out.SockDiag},
	} {
		name, list := src.name, src.list
		// Warm up: the first calls pay for module autoload and, under
		// TCG, for translating the code path; the watch runs it for hours.
		for i := 0; i < 20; i++ {
			if _, err := list(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		cpu0, err := cpuTime()
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		for i := 0; i < scans; i++ {
			if _, err := list(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		wall := time.Since(t0)
		cpu1, err := cpuTime()
		if err != nil {
			return nil, err
		}
		*src.cost = scanCost{
			CPUms:  float64((cpu1 - cpu0).Microseconds()) / 1000 / float64(scans),
			WallMs: float64(wall.Microseconds()) / 1000 / float64(scans),
		}
	}
	return out, nil
}

func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
