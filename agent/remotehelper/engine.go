package remotehelper

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// engine is the few calls of the Docker API the helper makes, on the
// engine's unix socket.
type engine struct {
	client *http.Client
}

func newEngine(socket string) *engine {
	return &engine{client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}}
}

func (e *engine) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
	if err != nil {
		return err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("docker engine: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("docker engine: GET %s: %s: %s", path, resp.Status, b)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v)
}

// published is one port the engine publishes on the server.
type published struct {
	Proto string
	IP    string
	Port  int
}

// publishedPorts lists the running containers' published ports.
func (e *engine) publishedPorts(ctx context.Context) (map[published]bool, error) {
	var list []struct {
		Ports []struct {
			IP         string `json:"IP"`
			PublicPort int    `json:"PublicPort"`
			Type       string `json:"Type"`
		} `json:"Ports"`
	}
	if err := e.get(ctx, "/containers/json", &list); err != nil {
		return nil, err
	}
	set := map[published]bool{}
	for _, c := range list {
		for _, p := range c.Ports {
			if p.PublicPort == 0 || (p.Type != "tcp" && p.Type != "udp") {
				continue
			}
			ip := p.IP
			if ip == "" {
				ip = "0.0.0.0"
			}
			set[published{Proto: p.Type, IP: ip, Port: p.PublicPort}] = true
		}
	}
	return set, nil
}

// events calls changed for each container event until ctx ends or the
// stream does (the engine restarted).
func (e *engine) events(ctx context.Context, changed func()) error {
	filters := url.QueryEscape(`{"type":["container"]}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/events?filters="+filters, nil)
	if err != nil {
		return err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("docker engine events: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("docker engine events: %s", resp.Status)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 4096), 1<<20)
	for lines.Scan() {
		changed()
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("docker engine events: %w", err)
	}
	return fmt.Errorf("docker engine events: the stream ended")
}

// bridgeGateway is the default bridge network's gateway address: where a
// container reaches its host (host-gateway). The engine names it in the
// network's IPAM config, or only through the bridge's own address.
func (e *engine) bridgeGateway(ctx context.Context) (string, error) {
	var nw struct {
		IPAM struct {
			Config []struct {
				Gateway string `json:"Gateway"`
			} `json:"Config"`
		} `json:"IPAM"`
		Options map[string]string `json:"Options"`
	}
	if err := e.get(ctx, "/networks/bridge", &nw); err != nil {
		return "", err
	}
	for _, c := range nw.IPAM.Config {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			return c.Gateway, nil
		}
	}
	name := nw.Options["com.docker.network.bridge.name"]
	if name == "" {
		name = "docker0"
	}
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("the bridge network names no gateway, and its interface: %w", err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", fmt.Errorf("the bridge %s's addresses: %w", name, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("the bridge %s has no IPv4 address", name)
}
