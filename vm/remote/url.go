// Package remote is the SSH side of a remote instance: the server named by
// an ssh:// URL, reached with the system ssh client in BatchMode, its
// facts probed, vmdock's helper installed in ~/.cache/vmdock and one
// session to that helper opened as a byte stream the agent protocol runs
// on.
package remote

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Target is the server an ssh:// URL names; User and Port are empty and 0
// when the URL leaves them to ssh's own config.
type Target struct {
	User string
	Host string
	Port int
}

// accepted is what every URL error says is accepted.
const accepted = "accepted: ssh://[user@]host[:port]"

// ParseURL reads ssh://[user@]host[:port]. Nothing may start with '-', so
// no part of the URL reaches ssh as an option.
func ParseURL(s string) (Target, error) {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" {
		return Target{}, fmt.Errorf("%q is not a URL; %s", s, accepted)
	}
	if u.Scheme != "ssh" {
		if u.Scheme == "" {
			return Target{}, fmt.Errorf("%q has no scheme; %s", s, accepted)
		}
		return Target{}, fmt.Errorf("%q: scheme %q is not supported; %s", s, u.Scheme, accepted)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return Target{}, fmt.Errorf("%q has a path, query or fragment; %s", s, accepted)
	}
	t := Target{Host: u.Hostname()}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return Target{}, fmt.Errorf("%q holds a password; use a key (ssh runs in BatchMode); %s", s, accepted)
		}
		t.User = u.User.Username()
	}
	if t.Host == "" || strings.HasPrefix(t.Host, "-") || strings.HasPrefix(t.User, "-") {
		return Target{}, fmt.Errorf("%q names no usable host; %s", s, accepted)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Target{}, fmt.Errorf("%q: port %q is not 1-65535; %s", s, p, accepted)
		}
		t.Port = n
	}
	return t, nil
}

// String is the target as ssh:// URL.
func (t Target) String() string {
	s := "ssh://"
	if t.User != "" {
		s += t.User + "@"
	}
	if strings.Contains(t.Host, ":") {
		s += "[" + t.Host + "]"
	} else {
		s += t.Host
	}
	if t.Port != 0 {
		s += ":" + strconv.Itoa(t.Port)
	}
	return s
}
