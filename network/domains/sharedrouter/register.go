package sharedrouter

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/router"
)

// hello and update are the registration protocol: one JSON value a line,
// a hello then the agent's containers each time they change.
type hello struct {
	Profile string `json:"profile,omitempty"`
	// List asks for the router's table instead (`vmdock domains`), so
	// listing names wakes no paused VM.
	List bool `json:"list,omitempty"`
}

type update struct {
	Containers []domains.Container `json:"containers"`
	// Yield asks the owner to give one of its ports up to a port the
	// agent publishes, GiveBack to take it again (yield.go); such a
	// message carries no containers.
	Yield    int `json:"yield,omitempty"`
	GiveBack int `json:"giveBack,omitempty"`
}

// member serves one registered agent until its connection ends.
func (d *Server) member(front *router.Router, c net.Conn) {
	defer c.Close()
	dec := json.NewDecoder(c)
	var h hello
	if err := dec.Decode(&h); err != nil {
		return
	}
	if h.List {
		d.answerListing(front, c)
		return
	}
	if err := d.settings.ValidProfile(h.Profile); err != nil || h.Profile == d.settings.Profile {
		slog.Warn("domains: registration refused", "profile", h.Profile, "err", err)
		return
	}
	d.mu.Lock()
	if d.members == nil { // closing
		d.mu.Unlock()
		return
	}
	d.members[c] = h.Profile
	d.mu.Unlock()
	sock := d.settings.localSock(h.Profile)
	front.Register(h.Profile, func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	})
	slog.Info("domains: serving another profile's names", "profile", h.Profile)
	d.followMember(front, h.Profile, dec)
	d.mu.Lock()
	delete(d.members, c)
	last := true
	for _, p := range d.members {
		if p == h.Profile {
			last = false // the agent registered again before this one ended
		}
	}
	d.mu.Unlock()
	if last {
		front.Unregister(h.Profile)
	}
}

// answerListing writes the router's table and addresses for `vmdock
// domains`.
func (d *Server) answerListing(front *router.Router, c net.Conn) {
	l := front.Table().Listing()
	for _, scheme := range []string{"http", "https", "dns"} {
		for _, a := range d.listening(scheme) {
			l.Listening = append(l.Listening, scheme+"://"+a.String())
		}
	}
	c.SetWriteDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	json.NewEncoder(c).Encode(l)                        //nolint:errcheck // the lister sees a short answer
}

// followMember applies a registered agent's updates until its connection
// ends, then gives back the ports it had yielded.
func (d *Server) followMember(front *router.Router, profile string, dec *json.Decoder) {
	yieldedTo := map[int]bool{} // given back when this member goes
	defer func() {
		for port := range yieldedTo {
			d.giveBack(port)
		}
	}()
	for {
		var u update
		if err := dec.Decode(&u); err != nil {
			return
		}
		switch {
		case u.Yield != 0:
			if d.Yield(u.Yield) != nil {
				yieldedTo[u.Yield] = true
			}
		case u.GiveBack != 0:
			if yieldedTo[u.GiveBack] {
				delete(yieldedTo, u.GiveBack)
				d.giveBack(u.GiveBack)
			}
		default:
			front.SetTable(profile, domains.Build(profile, u.Containers)) //nolint:errcheck // registered in member
		}
	}
}

// join registers with the owner of the ports, if there is one.
func (d *Server) join() bool {
	c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(d.ctx, "unix", filepath.Join(d.settings.Home, registerSock))
	if err != nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil { // Close ran meanwhile
		c.Close()
		return false
	}
	enc := json.NewEncoder(c)
	c.SetWriteDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	if enc.Encode(hello{Profile: d.settings.Profile}) != nil || enc.Encode(update{Containers: d.containers}) != nil {
		c.Close()
		return false
	}
	d.upstream = c
	slog.Info("domains: another agent owns the router's ports; registered with it")
	return true
}
