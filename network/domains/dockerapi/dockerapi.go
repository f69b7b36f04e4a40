// Package dockerapi reads what container domains need from a docker
// engine's API: the running containers, and the event stream that says
// when to read them again (names follow docker events, not polling).
package dockerapi

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/vmdock/vmdock/dockerhost/engineapi"
	"github.com/vmdock/vmdock/network/domains"
)

// Client talks to one docker engine.
type Client struct {
	api *engineapi.Client

	mu sync.Mutex
	// imageLabels caches the labels of images by ID (an image's config
	// never changes); nil for an image that is gone.
	imageLabels map[string]map[string]string
}

// maxCachedImages bounds imageLabels; past it the cache starts over.
const maxCachedImages = 256

// New is a Client whose connections come from dial (the docker socket's
// host-side forward, or the agent channel).
func New(dial func(ctx context.Context) (net.Conn, error)) *Client {
	return &Client{api: engineapi.New("docker", dial), imageLabels: map[string]map[string]string{}}
}

// Unix is a Client for the docker socket at path.
func Unix(path string) *Client {
	return New(func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	})
}

// container is the part of GET /containers/json read here.
type container struct {
	ID      string            `json:"Id"`
	ImageID string            `json:"ImageID"`
	Names   []string          `json:"Names"`
	Labels  map[string]string `json:"Labels"`
	Created int64             `json:"Created"`
	Ports   []struct {
		PrivatePort int    `json:"PrivatePort"`
		Type        string `json:"Type"`
	} `json:"Ports"`
	HostConfig struct {
		NetworkMode string `json:"NetworkMode"`
	} `json:"HostConfig"`
	NetworkSettings struct {
		Networks map[string]struct {
			IPAddress string `json:"IPAddress"`
		} `json:"Networks"`
	} `json:"NetworkSettings"`
}

// Containers are the running containers.
func (c *Client) Containers(ctx context.Context) ([]domains.Container, error) {
	var raw []container
	if err := c.api.Get(ctx, "/containers/json", nil, &raw); err != nil {
		return nil, fmt.Errorf("docker: list containers: %w", err)
	}
	out := make([]domains.Container, 0, len(raw))
	for _, r := range raw {
		if err := c.dropInherited(ctx, &r); err != nil {
			return nil, err
		}
		out = append(out, convert(r))
	}
	return out, nil
}

// dropInherited removes from r the name and port labels it only has from
// its image: docker lists a container's labels merged with its image's.
func (c *Client) dropInherited(ctx context.Context, r *container) error {
	if !domains.HasOwnLabels(r.Labels) || r.ImageID == "" {
		return nil
	}
	img, err := c.imageLabelsOf(ctx, r.ImageID)
	if err != nil {
		return err
	}
	r.Labels = domains.WithoutInherited(r.Labels, img)
	return nil
}

// imageLabelsOf is the labels of image id; nil for an image that is gone.
func (c *Client) imageLabelsOf(ctx context.Context, id string) (map[string]string, error) {
	c.mu.Lock()
	l, ok := c.imageLabels[id]
	c.mu.Unlock()
	if ok {
		return l, nil
	}
	var img struct {
		Config struct {
			Labels map[string]string `json:"Labels"`
		} `json:"Config"`
	}
	err := c.api.Get(ctx, "/images/"+url.PathEscape(id)+"/json", nil, &img)
	if err != nil && !engineapi.IsNotFound(err) {
		return nil, fmt.Errorf("docker: inspect image %s: %w", id, err)
	}
	c.mu.Lock()
	if len(c.imageLabels) >= maxCachedImages {
		c.imageLabels = map[string]map[string]string{}
	}
	c.imageLabels[id] = img.Config.Labels
	c.mu.Unlock()
	return img.Config.Labels, nil
}

func convert(r container) domains.Container {
	c := domains.Container{ID: r.ID, Labels: r.Labels, Created: time.Unix(r.Created, 0)}
	if len(r.Names) > 0 {
		c.Name = r.Names[0]
		if len(c.Name) > 0 && c.Name[0] == '/' {
			c.Name = c.Name[1:]
		}
	}
	for _, p := range r.Ports {
		if p.Type == "tcp" {
			c.Exposed = append(c.Exposed, p.PrivatePort)
		}
	}
	if r.HostConfig.NetworkMode == "host" {
		// it listens on the guest's own interfaces
		c.IP = "127.0.0.1"
		return c
	}
	// the first network by name with an address, so the choice is stable
	nets := make([]string, 0, len(r.NetworkSettings.Networks))
	for n := range r.NetworkSettings.Networks {
		nets = append(nets, n)
	}
	sort.Strings(nets)
	for _, n := range nets {
		if ip := r.NetworkSettings.Networks[n].IPAddress; ip != "" {
			c.IP = ip
			break
		}
	}
	return c
}

// eventFilter is the events that can change a name or its address.
var eventFilter = `{"type":["container","network"],"event":["start","die","destroy","rename","update","connect","disconnect"]}`

// Watch calls changed once the event stream is open (so nothing that
// happens after the first list is missed) and again after each event,
// until ctx ends or the stream breaks (the error says which).
func (c *Client) Watch(ctx context.Context, changed func()) error {
	resp, err := c.api.Do(ctx, http.MethodGet, "/events", url.Values{"filters": {eventFilter}}, nil, "")
	if err != nil {
		return fmt.Errorf("docker: events: %w", err)
	}
	defer resp.Body.Close()
	changed()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		changed()
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("docker: events: %w", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("docker: events: the stream ended")
}
