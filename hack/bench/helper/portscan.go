package main

import (
	"fmt"
	"net"
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

// portScan measures both port-list sources side by side, with conns
// established loopback connections open (a dev stack's database pools and
// keep-alives: /proc/net prints every one of them on every scan).
func portScan(conns, scans int) (map[string]scanCost, error) {
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
	sources := map[string]func() ([]portlist.Port, error){
		"procnet":  func() ([]portlist.Port, error) { return portlist.ProcNet("/proc/net") },
		"sockdiag": portlist.SockDiag,
	}
	out := map[string]scanCost{}
	for _, name := range []string{"procnet", "sockdiag"} {
		list := sources[name]
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
		out[name] = scanCost{
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
