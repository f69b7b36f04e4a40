package guest

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
)

const daemonJSON = "/etc/docker/daemon.json"

// startDocker writes daemon.json and containerd's configuration, starts
// containerd and docker, and waits until the socket answers /_ping.
func (s *Server) startDocker(ctx context.Context) error {
	if err := s.writeDaemonJSON(); err != nil {
		return err
	}
	if err := s.writeContainerdConfig(); err != nil {
		return err
	}
	if _, err := s.rooms().disks.ReleaseReserveIfFull(); err != nil {
		s.Log.Warn("data disk reserve", "err", err)
	}
	if err := s.startUnitsNow(ctx, []string{"containerd", "docker.socket"}, []string{"docker.service"}); err != nil {
		return fmt.Errorf("start docker: %w", err)
	}
	sock := s.DockerSocket
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

// startUnitsNow starts each group of units after the one before it,
// without the ordering their unit files ask for (network.target,
// basic.target and the like): the agent has already done what the daemons
// need (the data disk, their configuration), and under TCG the rest of the
// boot would hold them for seconds.
func (s *Server) startUnitsNow(ctx context.Context, groups ...[]string) error {
	for _, units := range groups {
		if _, err := s.OS.Run(ctx, "systemctl", append([]string{"start", "--job-mode=ignore-dependencies"}, units...)...); err != nil {
			return err
		}
	}
	return nil
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
func (s *Server) writeDaemonJSON() error {
	p := s.path(daemonJSON)
	cfg := map[string]any{}
	b, err := os.ReadFile(p)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("parse %s: %w", daemonJSON, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", daemonJSON, err)
	}
	s.mu.Lock()
	ip := s.hostAccessIP
	s.mu.Unlock()
	if ip != "" {
		cfg["host-gateway-ip"] = ip
	} else {
		delete(cfg, "host-gateway-ip")
	}
	// Containers resolve through the agent's DNS server, which knows
	// host.docker.internal; user networks' embedded DNS forwards to it too.
	if d := s.rooms().dns.IP(); d != "" {
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
		return fmt.Errorf("write %s: %w", daemonJSON, err)
	}
	return guestos.WriteFile(p, append(out, '\n'), 0o644)
}

// isOnlyDNS reports whether v, a daemon.json "dns" value, is exactly [ip].
func isOnlyDNS(v any, ip string) bool {
	l, ok := v.([]any)
	return ok && ip != "" && len(l) == 1 && l[0] == ip
}
