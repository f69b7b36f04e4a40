// Package domains turns a profile's containers into the names the router
// answers under vmdock.localhost: which name goes to which
// container and port, and which containers lost a name to another. It
// knows nothing of docker's API or of the network: callers hand it
// Containers and get a Table.
package domains

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SocketName is the file under $VMDOCK_HOME where the host agent that
// owns the router's ports takes registrations and answers listings.
const SocketName = "_domains.sock"

// Suffix is the domain every name lives under. Browsers resolve
// *.localhost to loopback by themselves (RFC 6761), so no DNS is needed.
const Suffix = "vmdock.localhost"

// DefaultProfile is the profile whose names carry no profile label.
const DefaultProfile = "default"

// The container labels that shape names and ports.
const (
	LabelDomains        = "dev.vmdock.domains"
	LabelHTTPPort       = "dev.vmdock.http-port"
	LabelComposeProject = "com.docker.compose.project"
	LabelComposeService = "com.docker.compose.service"
)

// ownLabels are the labels a container must set itself to count: from
// its image, any container run from it would claim names or pick ports.
var ownLabels = []string{LabelDomains, LabelHTTPPort}

// WithoutInherited is labels without the name and port labels whose value
// is the image's: docker and nerdctl list a container's labels merged
// with its image's, and only the container's own count. labels is not
// changed; a copy is returned when something goes.
func WithoutInherited(labels, image map[string]string) map[string]string {
	out, copied := labels, false
	for _, l := range ownLabels {
		if v, ok := image[l]; ok && labels[l] == v {
			if !copied {
				out, copied = maps.Clone(labels), true
			}
			delete(out, l)
		}
	}
	return out
}

// HasOwnLabels reports whether labels has any label WithoutInherited may
// drop, so an image is looked up only then.
func HasOwnLabels(labels map[string]string) bool {
	for _, l := range ownLabels {
		if _, ok := labels[l]; ok {
			return true
		}
	}
	return false
}

// DefaultPort is the target port of a container that exposes none.
const DefaultPort = 80

// Source is where a name came from; a higher Source wins a name.
type Source int

const (
	FromContainerName Source = iota
	FromCompose
	FromLabel
)

func (s Source) String() string {
	switch s {
	case FromLabel:
		return "label"
	case FromCompose:
		return "compose"
	default:
		return "container"
	}
}

// MarshalText makes Source readable in `vmdock domains --json`.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (s *Source) UnmarshalText(b []byte) error {
	for _, v := range []Source{FromContainerName, FromCompose, FromLabel} {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("name source %q is not accepted; accepted: container, compose, label", b)
}

// Container is what a name needs to know of one running container.
type Container struct {
	ID      string
	Name    string // without docker's leading "/"
	Labels  map[string]string
	Exposed []int // exposed TCP ports, published or not
	Created time.Time
	// IP is the container's address inside the guest; "" for a container
	// with no address of its own (network "none"), which cannot be routed.
	IP string
}

// Route is one name and where it goes.
type Route struct {
	Name        string `json:"name"`
	Profile     string `json:"profile"`
	ContainerID string `json:"containerId"`
	Container   string `json:"container"`
	Source      Source `json:"source"`
	// Port is the target port; 0 when the route has Problem instead.
	Port int `json:"port,omitempty"`
	// Addr is host:port inside the guest, "" when Problem is set.
	Addr string `json:"addr,omitempty"`
	// Problem says why the name cannot be proxied (several exposed
	// ports and no port label, no address); the router shows it as a page.
	Problem string `json:"problem,omitempty"`
	created time.Time
}

// Conflict is a name claimed by more than one container.
type Conflict struct {
	Name   string  `json:"name"`
	Winner Route   `json:"winner"`
	Losers []Route `json:"losers"`
}

// Table is the names of one or more profiles, resolved.
type Table struct {
	profile   string // "" for a merged table
	routes    map[string]Route
	claims    []Route // every claim, winners and losers, for Merge
	conflicts []Conflict
	// Problems are labels that could not be used, one line each.
	Problems []string
}

// Label makes s a DNS label: lowercased, "_" and "." become "-". Other
// characters docker allows in names are already DNS-safe.
func Label(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("_", "-", ".", "-").Replace(s)
}

// zone is the part after the container's own labels: the profile (if not
// the default) and the suffix.
func zone(profile string) string {
	if profile == "" || profile == DefaultProfile {
		return Suffix
	}
	return Label(profile) + "." + Suffix
}

// Names are the names a container claims, each with its source. Bad
// entries in its domains label come back as problems.
func Names(profile string, c Container) (names map[string]Source, problems []string) {
	names = map[string]Source{}
	if n := Label(strings.TrimPrefix(c.Name, "/")); n != "" {
		names[n+"."+zone(profile)] = FromContainerName
	}
	if svc, proj := c.Labels[LabelComposeService], c.Labels[LabelComposeProject]; svc != "" && proj != "" {
		names[Label(svc)+"."+Label(proj)+"."+zone(profile)] = FromCompose
	}
	for _, raw := range strings.FieldsFunc(c.Labels[LabelDomains], func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := fullName(raw)
		if err == nil && !strings.HasSuffix(n, "."+zone(profile)) {
			// Another profile's zone is that profile's to fill.
			err = fmt.Errorf("name %q is not accepted in profile %s; accepted: full names ending in .%s", raw, profileName(profile), zone(profile))
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("container %s: label %s: %v", c.Name, LabelDomains, err))
			continue
		}
		names[n] = FromLabel
	}
	return names, problems
}

// fullName checks a name from the domains label: a full name under the
// suffix, each label normalised like container names.
func fullName(raw string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(raw)), ".")
	if !strings.HasSuffix(n, "."+Suffix) {
		return "", fmt.Errorf("name %q is not accepted; accepted: full names ending in .%s", raw, Suffix)
	}
	parts := strings.Split(strings.TrimSuffix(n, "."+Suffix), ".")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, "_", "-")
		if parts[i] == "" || len(parts[i]) > 63 {
			return "", fmt.Errorf("name %q is not accepted; accepted: full names ending in .%s with labels of 1-63 characters", raw, Suffix)
		}
	}
	return strings.Join(parts, ".") + "." + Suffix, nil
}

// webPorts are the ports a container's names go to without a label: the
// usual ports of web servers and dev servers. A browser must not be led to
// a port that speaks something else (memcached, a database).
var webPorts = []int{80, 443, 3000, 3001, 4000, 4200, 5000, 5173, 8000, 8008, 8080, 8081, 8443, 8888, 9000}

// Target is the port a container's names go to: the port label, else the
// one exposed TCP port when it is a web port, else DefaultPort. Several
// exposed ports, or one that is no web port, and no label is a problem
// naming them, not a guess.
func Target(c Container) (port int, problem string) {
	if v, ok := c.Labels[LabelHTTPPort]; ok {
		p, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || p < 1 || p > 65535 {
			return 0, fmt.Sprintf("label %s=%q is not accepted; accepted: a port 1-65535", LabelHTTPPort, v)
		}
		return p, ""
	}
	ports := slices.Clone(c.Exposed)
	slices.Sort(ports)
	ports = slices.Compact(ports)
	switch len(ports) {
	case 0:
		return DefaultPort, ""
	case 1:
		if !slices.Contains(webPorts, ports[0]) {
			return 0, fmt.Sprintf("container %s exposes only TCP port %d, which vmdock does not route to unless the label %s=%d says so (ports routed without it: %s)",
				c.Name, ports[0], LabelHTTPPort, ports[0], portList(webPorts))
		}
		return ports[0], ""
	}
	return 0, fmt.Sprintf("container %s exposes several TCP ports (%s); choose one with the label %s=<port>", c.Name, portList(ports), LabelHTTPPort)
}

func portList(ports []int) string {
	strs := make([]string, len(ports))
	for i, p := range ports {
		strs[i] = strconv.Itoa(p)
	}
	return strings.Join(strs, ", ")
}

// Build resolves one profile's containers into a Table.
func Build(profile string, cs []Container) *Table {
	var claims []Route
	var problems []string
	for _, c := range cs {
		names, probs := Names(profile, c)
		problems = append(problems, probs...)
		port, problem := Target(c)
		addr := ""
		if problem == "" {
			if c.IP == "" {
				problem = fmt.Sprintf("container %s has no IP address of its own (network none?)", c.Name)
				port = 0
			} else {
				addr = net.JoinHostPort(c.IP, strconv.Itoa(port))
			}
		}
		for n, src := range names {
			claims = append(claims, Route{
				Name: n, Profile: profileName(profile), ContainerID: c.ID, Container: strings.TrimPrefix(c.Name, "/"),
				Source: src, Port: port, Addr: addr, Problem: problem, created: c.Created,
			})
		}
	}
	t := resolve(claims)
	t.profile = profileName(profile)
	sort.Strings(problems)
	t.Problems = problems
	return t
}

func profileName(p string) string {
	if p == "" {
		return DefaultProfile
	}
	return p
}

// Merge resolves several profiles' tables as one, so a name two profiles
// claim (a label's full name, say) is decided by the same rules. A name in
// another merged profile's zone is that profile's: the default profile's
// zone holds the others', and its labels and compose projects (svc.dev)
// must not take their names.
func Merge(ts ...*Table) *Table {
	var claims []Route
	var problems []string
	var zones []string
	for _, t := range ts {
		if t != nil && t.profile != "" && t.profile != DefaultProfile {
			zones = append(zones, zone(t.profile))
		}
	}
	for _, t := range ts {
		if t == nil {
			continue
		}
		for _, c := range t.claims {
			if z := otherZone(c, zones); z != "" {
				problems = append(problems, fmt.Sprintf("container %s (profile %s): name %s is not routed: it is in profile zone %s", c.Container, c.Profile, c.Name, z))
				continue
			}
			claims = append(claims, c)
		}
		problems = append(problems, t.Problems...)
	}
	m := resolve(claims)
	m.Problems = problems
	return m
}

// otherZone is the zone among zones, not c's own profile's, that c's name
// is in; "" for none.
func otherZone(c Route, zones []string) string {
	own := zone(c.Profile)
	for _, z := range zones {
		if z != own && strings.HasSuffix(c.Name, "."+z) {
			return z
		}
	}
	return ""
}

// wins orders claims on one name: higher source, then newer container,
// then (for a stable answer) profile and container ID.
func wins(a, b Route) bool {
	if a.Source != b.Source {
		return a.Source > b.Source
	}
	if !a.created.Equal(b.created) {
		return a.created.After(b.created)
	}
	if a.Profile != b.Profile {
		return a.Profile < b.Profile
	}
	return a.ContainerID < b.ContainerID
}

func resolve(claims []Route) *Table {
	byName := map[string][]Route{}
	for _, c := range claims {
		byName[c.Name] = append(byName[c.Name], c)
	}
	t := &Table{routes: map[string]Route{}, claims: claims}
	for n, cs := range byName {
		sort.Slice(cs, func(i, j int) bool { return wins(cs[i], cs[j]) })
		t.routes[n] = cs[0]
		if len(cs) > 1 {
			t.conflicts = append(t.conflicts, Conflict{Name: n, Winner: cs[0], Losers: cs[1:]})
		}
	}
	sort.Slice(t.conflicts, func(i, j int) bool { return t.conflicts[i].Name < t.conflicts[j].Name })
	return t
}

// HostName turns a Host header or SNI into a table key: no port, no
// trailing dot, lowercase.
func HostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// Lookup finds the route for a Host header or SNI name.
func (t *Table) Lookup(host string) (Route, bool) {
	if t == nil {
		return Route{}, false
	}
	r, ok := t.routes[HostName(host)]
	return r, ok
}

// Routes are the winning routes, by name.
func (t *Table) Routes() []Route {
	if t == nil {
		return nil
	}
	out := make([]Route, 0, len(t.routes))
	for _, r := range t.routes {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Conflicts are the names more than one container claims, by name.
func (t *Table) Conflicts() []Conflict {
	if t == nil {
		return nil
	}
	return t.conflicts
}

// Listing is a table as `vmdock domains --json` shows it.
type Listing struct {
	Routes    []Route    `json:"routes"`
	Conflicts []Conflict `json:"conflicts"`
	Problems  []string   `json:"problems"`
	// Listening is where the router serves ("http://127.0.0.1:80"), when
	// the listing came from it.
	Listening []string `json:"listening,omitempty"`
	// Skipped are running profiles whose names could not be read, and why.
	Skipped map[string]string `json:"skipped,omitempty"`
}

// Listing is t's routes, conflicts and problems, never null in JSON.
func (t *Table) Listing() Listing {
	l := Listing{Routes: t.Routes(), Conflicts: t.Conflicts(), Problems: nil}
	if t != nil {
		l.Problems = t.Problems
	}
	if l.Routes == nil {
		l.Routes = []Route{}
	}
	if l.Conflicts == nil {
		l.Conflicts = []Conflict{}
	}
	if l.Problems == nil {
		l.Problems = []string{}
	}
	return l
}

// Under reports whether name is the suffix or below it: the only names
// the router answers and the CA signs.
func Under(name string) bool {
	name = HostName(name)
	return name == Suffix || strings.HasSuffix(name, "."+Suffix)
}

// CheckHostName accepts a DNS host name (lowercase, as HostName makes
// it): labels of 1-63 letters, digits and hyphens, 253 characters in
// all. A TLS client's SNI is any bytes it likes; only such names may
// reach the CA.
func CheckHostName(name string) error {
	const accepted = "accepted: DNS names of letters, digits and hyphens, labels of 1-63 characters, 253 in all"
	if len(name) == 0 || len(name) > 253 {
		return fmt.Errorf("name of %d characters is not accepted; %s", len(name), accepted)
	}
	for label := range strings.SplitSeq(name, ".") {
		if len(label) == 0 || len(label) > 63 {
			return fmt.Errorf("name %q is not accepted; %s", name, accepted)
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
				return fmt.Errorf("name %q is not accepted; %s", name, accepted)
			}
		}
	}
	return nil
}
