// Package nerdctlapi reads what container domains need from the
// containerd runtime, through the nerdctl in the guest: the running
// containers (`nerdctl container inspect`, docker-compatible JSON, which
// carries each container's address read from its network namespace, a
// thing only the guest can see), and containerd's event stream (`nerdctl
// events`) that says when to read them again, so names follow events, not
// polling. The commands run through Exec, the guest agent's exec op in the
// host agent; tests hand it fake output.
package nerdctlapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmdock/vmdock/network/domains"
)

// Exec runs argv in the guest with its standard output to stdout and its
// standard error to stderr, and returns the exit code. It returns when the
// command ends, or when ctx does (the command is then killed).
type Exec func(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error)

// DefaultNamespace is nerdctl's namespace when none is configured: the
// one `vmdock nerdctl` and `nerdctl compose` use.
const DefaultNamespace = "default"

// Client reads one guest's containerd through nerdctl.
type Client struct {
	exec Exec
	// Namespace is the containerd namespace whose containers get names.
	Namespace string
	// Settle are the delays after the event stream starts at which
	// Watch asks for a list again: nerdctl says nothing once it has
	// subscribed, so a container started while it was subscribing is
	// caught by one of these. Default: 1 s and 4 s.
	Settle []time.Duration
}

// New is a Client whose commands run through exec.
func New(exec Exec) *Client {
	return &Client{exec: exec, Namespace: DefaultNamespace}
}

// listScript prints the running containers of the namespace as `nerdctl
// container inspect` does, or nothing when none runs. The IDs come from
// `nerdctl ps` (running only); a container that goes between the two makes
// inspect fail, and the caller lists again.
const listScript = `ids=$(nerdctl --namespace "$1" ps -q --no-trunc) || exit
[ -z "$ids" ] || exec nerdctl --namespace "$1" container inspect $ids`

// The nerdctl labels read here.
const (
	labelNetworks = "nerdctl/networks" // JSON list of the networks given to run
)

// container is the part of nerdctl's docker-compatible inspect read here.
type container struct {
	ID      string `json:"Id"`
	Name    string `json:"Name"`
	Created string `json:"Created"`
	Image   string `json:"Image"`
	State   *struct {
		Running bool `json:"Running"`
	} `json:"State"`
	Config *struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	NetworkSettings *struct {
		IPAddress string                                 `json:"IPAddress"`
		Ports     map[string]json.RawMessage             `json:"Ports"`
		Networks  map[string]*struct{ IPAddress string } `json:"Networks"`
	} `json:"NetworkSettings"`
}

// image is the part of `nerdctl image inspect` read here.
type image struct {
	Config *struct {
		ExposedPorts map[string]json.RawMessage `json:"ExposedPorts"`
		Labels       map[string]string          `json:"Labels"`
	} `json:"Config"`
}

// imageConfig is what a container takes from its image here.
type imageConfig struct {
	ports  []int
	labels map[string]string
}

// run runs argv and returns its output; a non-zero exit is an error with
// the command's standard error.
func (c *Client) run(ctx context.Context, argv ...string) ([]byte, error) {
	var out, errOut bytes.Buffer
	code, err := c.exec(ctx, argv, &out, &limitWriter{w: &errOut, n: 2048})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return out.Bytes(), fmt.Errorf("exit status %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	return out.Bytes(), nil
}

// Containers are the namespace's running containers.
func (c *Client) Containers(ctx context.Context) ([]domains.Container, error) {
	out, err := c.run(ctx, "sh", "-c", listScript, "sh", c.namespace())
	if err != nil {
		return nil, fmt.Errorf("nerdctl: list containers: %w", err)
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return []domains.Container{}, nil
	}
	var raw []container
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("nerdctl: list containers: %w", err)
	}
	var running []container
	var images []string
	seen := map[string]bool{}
	for _, r := range raw {
		if r.State != nil && !r.State.Running {
			continue // stopped between ps and inspect
		}
		running = append(running, r)
		if r.Image != "" && !seen[r.Image] {
			seen[r.Image] = true
			images = append(images, r.Image)
		}
	}
	// the images' EXPOSE lines, which docker lists with the ports, and
	// their labels, which the containers' labels include; a removed image
	// (rmi -f under a running container) fails the whole inspect, and its
	// containers keep their published ports and labels as listed
	configs, err := c.imageConfigs(ctx, images)
	if err != nil {
		configs = nil
	}
	cs := make([]domains.Container, 0, len(running))
	for _, r := range running {
		ct := convert(r)
		img := configs[r.Image]
		ct.Exposed = mergePorts(ct.Exposed, img.ports)
		ct.Labels = domains.WithoutInherited(ct.Labels, img.labels)
		cs = append(cs, ct)
	}
	return cs, nil
}

func (c *Client) namespace() string {
	if c.Namespace == "" {
		return DefaultNamespace
	}
	return c.Namespace
}

// imageConfigs is each image's exposed TCP ports and labels, by the name
// containers carry; one nerdctl call answers for all, in the order asked.
func (c *Client) imageConfigs(ctx context.Context, images []string) (map[string]imageConfig, error) {
	if len(images) == 0 {
		return nil, nil
	}
	argv := append([]string{"nerdctl", "--namespace", c.namespace(), "image", "inspect"}, images...)
	out, err := c.run(ctx, argv...)
	if err != nil {
		return nil, fmt.Errorf("nerdctl: inspect images: %w", err)
	}
	var raw []image
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("nerdctl: inspect images: %w", err)
	}
	if len(raw) != len(images) {
		return nil, fmt.Errorf("nerdctl: inspect images: %d answers for %d images", len(raw), len(images))
	}
	m := make(map[string]imageConfig, len(images))
	for i, im := range raw {
		if im.Config != nil {
			m[images[i]] = imageConfig{ports: tcpPorts(im.Config.ExposedPorts), labels: im.Config.Labels}
		}
	}
	return m, nil
}

func convert(r container) domains.Container {
	c := domains.Container{ID: r.ID, Name: strings.TrimPrefix(r.Name, "/")}
	if r.Config != nil {
		c.Labels = r.Config.Labels
	}
	if t, err := time.Parse(time.RFC3339Nano, r.Created); err == nil {
		c.Created = t
	}
	ns := r.NetworkSettings
	if ns != nil {
		// published ports: nerdctl has no list of exposed ones per container
		c.Exposed = tcpPorts(ns.Ports)
	}
	if hostNetwork(c.Labels[labelNetworks]) {
		// it listens on the guest's own interfaces
		c.IP = "127.0.0.1"
		return c
	}
	if ns == nil {
		return c
	}
	if ns.IPAddress != "" {
		c.IP = ns.IPAddress // the primary interface's
		return c
	}
	// the first interface by name with an address, so the choice is stable
	nets := make([]string, 0, len(ns.Networks))
	for n := range ns.Networks {
		nets = append(nets, n)
	}
	sort.Strings(nets)
	for _, n := range nets {
		if e := ns.Networks[n]; e != nil && e.IPAddress != "" {
			c.IP = e.IPAddress
			break
		}
	}
	return c
}

// hostNetwork reports whether nerdctl's networks label says --net host.
func hostNetwork(label string) bool {
	var nets []string
	if json.Unmarshal([]byte(label), &nets) != nil {
		return false
	}
	for _, n := range nets {
		if n == "host" {
			return true
		}
	}
	return false
}

// tcpPorts reads docker's "80/tcp" keys.
func tcpPorts[V any](m map[string]V) []int {
	var ports []int
	for k := range m {
		p, proto, _ := strings.Cut(k, "/")
		if proto != "" && proto != "tcp" {
			continue
		}
		if n, err := strconv.Atoi(p); err == nil && n > 0 && n < 65536 {
			ports = append(ports, n)
		}
	}
	sort.Ints(ports)
	return ports
}

func mergePorts(a, b []int) []int {
	if len(b) == 0 {
		return a
	}
	seen := map[int]bool{}
	var out []int
	for _, p := range append(append([]int(nil), a...), b...) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out
}

// event is the part of a `nerdctl events --format '{{json .}}'` line read
// here.
type event struct {
	Namespace string `json:"Namespace"`
	Topic     string `json:"Topic"`
}

// relevant reports whether an event can change a name or its address: a
// task starting or ending, a container changed (renamed, relabelled) or
// removed. Image, snapshot and content events (a pull, a build) are not.
func (c *Client) relevant(e event) bool {
	if e.Namespace != "" && e.Namespace != c.namespace() {
		return false
	}
	switch e.Topic {
	case "/tasks/start", "/tasks/exit", "/tasks/delete", "/tasks/paused", "/tasks/resumed",
		"/containers/update", "/containers/delete":
		return true
	}
	return false
}

// maxEventLine bounds one event line; a longer one is skipped whole.
const maxEventLine = 1 << 20

// Watch runs `nerdctl events` in the guest and calls changed once it
// starts, again after each Settle delay, and after each event that can
// change a name, until ctx ends or the command does (the error says which).
func (c *Client) Watch(ctx context.Context, changed func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue // nerdctl ends each formatted event with a blank line
			}
			var e event
			if json.Unmarshal(line, &e) != nil || c.relevant(e) {
				// an unreadable line still says something happened
				changed()
			}
		}
		// a line over the limit: read on so the command is not blocked
		io.Copy(io.Discard, pr) //nolint:errcheck // the writer's end says why
	}()
	changed()
	settle := c.Settle
	if settle == nil {
		settle = []time.Duration{time.Second, 4 * time.Second}
	}
	go func() {
		start := time.Now()
		for _, d := range settle {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(d))):
				changed()
			}
		}
	}()
	var errOut bytes.Buffer
	code, err := c.exec(ctx, []string{"nerdctl", "events", "--format", "{{json .}}"}, pw, &limitWriter{w: &errOut, n: 2048})
	pw.Close()
	<-done
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("nerdctl: events: %w", err)
	case code != 0:
		return fmt.Errorf("nerdctl: events: exit status %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	return errors.New("nerdctl: events: the stream ended")
}

// limitWriter keeps the first n bytes and drops the rest.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k]) //nolint:errcheck // a bytes.Buffer
		l.n -= k
	}
	return len(p), nil
}
