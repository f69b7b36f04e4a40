package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/vmdock/vmdock/agent"
	"github.com/vmdock/vmdock/agent/guest/guestos"
	"github.com/vmdock/vmdock/agent/guest/runtime"
)

// DaemonJSON is dockerd's configuration.
const DaemonJSON = "/etc/docker/daemon.json"

// Engine is the docker runtime: dockerd on containerd.
type Engine struct {
	guestos.Sys
	// Socket is where dockerd answers; default /var/run/docker.sock.
	Socket string
	// ReleaseReserve frees the data disk's reserve when the disk is full,
	// so the daemon starts; nil: nothing to free.
	ReleaseReserve func() (bool, error)
}

// Start writes daemon.json and containerd's configuration, starts
// containerd and docker, and waits until the socket answers /_ping.
func (s *Engine) Start(ctx context.Context, cfg runtime.Config) error {
	if err := s.writeDaemonJSON(cfg); err != nil {
		return err
	}
	if err := runtime.WriteContainerdConfig(s.Sys); err != nil {
		return err
	}
	if s.ReleaseReserve != nil {
		if _, err := s.ReleaseReserve(); err != nil {
			s.Logger().Warn("data disk reserve", "err", err)
		}
	}
	if err := runtime.StartUnitsNow(ctx, s.OS, []string{"containerd", "docker.socket"}, []string{"docker.service"}); err != nil {
		return fmt.Errorf("start docker: %w", err)
	}
	sock := s.Socket
	if sock == "" {
		sock = agent.GuestDockerSocket
	}
	var last error
	for {
		if last = pingDocker(ctx, sock); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker did not answer on %s: %w", sock, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func pingDocker(ctx context.Context, sock string) error {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/_ping answered %s", resp.Status)
	}
	return nil
}

// writeDaemonJSON keeps whatever the image ships and only sets what vmdock
// owns: host-gateway-ip, so `--add-host x:host-gateway` reaches the host,
// and dns, so containers resolve host.docker.internal.
func (s *Engine) writeDaemonJSON(rc runtime.Config) error {
	p := s.Path(DaemonJSON)
	cfg := map[string]any{}
	b, err := os.ReadFile(p)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("parse %s: %w", DaemonJSON, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", DaemonJSON, err)
	}
	ip := rc.HostAccessIP
	if ip != "" {
		cfg["host-gateway-ip"] = ip
	} else {
		delete(cfg, "host-gateway-ip")
	}
	// Containers resolve through the agent's DNS server, which knows
	// host.docker.internal; user networks' embedded DNS forwards to it too.
	if d := rc.DNSIP; d != "" {
		cfg["dns"] = []string{d}
	} else if isOnlyDNS(cfg["dns"], ip) {
		// Written on an earlier boot, but no server answers there now.
		delete(cfg, "dns")
	}
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", DaemonJSON, err)
	}
	return guestos.WriteFile(p, append(out, '\n'), 0o644)
}

// isOnlyDNS reports whether v, a daemon.json "dns" value, is exactly [ip].
func isOnlyDNS(v any, ip string) bool {
	l, ok := v.([]any)
	return ok && ip != "" && len(l) == 1 && l[0] == ip
}
