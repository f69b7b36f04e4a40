// Package proxy decides which HTTP proxy the guest's daemons use: the
// config's, else the host's environment (HTTP_PROXY and friends), else the
// host's system settings (macOS). A proxy on the host's loopback is
// rewritten to the address the guest reaches the host's loopback through.
package proxy

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Settings are the proxy URLs and the hosts that bypass them, in the
// conventional variables' syntax (NO_PROXY: a comma-separated list).
type Settings struct {
	HTTP    string `yaml:"http,omitempty" json:"http,omitempty"`
	HTTPS   string `yaml:"https,omitempty" json:"https,omitempty"`
	NoProxy string `yaml:"noProxy,omitempty" json:"noProxy,omitempty"`
}

// IsZero says no proxy is set.
func (s Settings) IsZero() bool { return s.HTTP == "" && s.HTTPS == "" && s.NoProxy == "" }

// Where the effective settings came from.
const (
	SourceNone   = ""
	SourceConfig = "config"
	SourceEnv    = "environment"
	SourceSystem = "system"
)

// Effective is what a start applies, and where it came from.
type Effective struct {
	Settings
	Source string
	// PAC is the URL of a proxy auto-config file the host's system
	// settings use; vmdock cannot evaluate it, so it is reported, not
	// applied.
	PAC string
}

// Resolve picks the settings: cfg when it sets anything, else the
// environment getenv reads, else system (nil: none on this platform).
func Resolve(cfg Settings, getenv func(string) string, system func() (Settings, string, error)) (Effective, error) {
	if !cfg.IsZero() {
		return Effective{Settings: cfg, Source: SourceConfig}, cfg.Validate()
	}
	if env := FromEnv(getenv); env.HTTP != "" || env.HTTPS != "" {
		return Effective{Settings: env, Source: SourceEnv}, env.Validate()
	}
	if system == nil {
		return Effective{}, nil
	}
	s, pac, err := system()
	if err != nil {
		return Effective{}, fmt.Errorf("the host's system proxy settings: %w", err)
	}
	if s.HTTP == "" && s.HTTPS == "" {
		return Effective{PAC: pac}, nil
	}
	return Effective{Settings: s, Source: SourceSystem, PAC: pac}, s.Validate()
}

// FromEnv reads HTTP_PROXY, HTTPS_PROXY and NO_PROXY, each in upper or
// lower case (upper first, as Go's net/http does).
func FromEnv(getenv func(string) string) Settings {
	get := func(name string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return getenv(strings.ToLower(name))
	}
	return Settings{HTTP: get("HTTP_PROXY"), HTTPS: get("HTTPS_PROXY"), NoProxy: get("NO_PROXY")}
}

// Validate checks each URL: a scheme the daemons understand and a host.
func (s Settings) Validate() error {
	for _, f := range []struct{ name, v string }{{"proxy.http", s.HTTP}, {"proxy.https", s.HTTPS}} {
		if f.v == "" {
			continue
		}
		if _, err := parse(f.v); err != nil {
			return fmt.Errorf("%s: %q is not accepted (%v); accepted: http://[user:password@]host:port, https:// or socks5://", f.name, Mask(f.v), err)
		}
	}
	if strings.ContainsAny(s.NoProxy, "\n\r\"\x00") {
		return fmt.Errorf("proxy.noProxy: %q is not accepted; accepted: a comma-separated list of hosts, domains and CIDRs", s.NoProxy)
	}
	return nil
}

func parse(raw string) (*url.URL, error) {
	if strings.ContainsAny(raw, " \t\n\r\"\x00") {
		return nil, fmt.Errorf("a space, quote or control character")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL")
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return nil, fmt.Errorf("scheme %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("no host")
	}
	return u, nil
}

// RewriteLoopback points a proxy on the host's loopback (127.0.0.0/8,
// localhost, ::1) at hostAccessIP, the guest address tunnelled to the
// host's loopback: the guest's own loopback has no proxy.
func (s Settings) RewriteLoopback(hostAccessIP string) Settings {
	if hostAccessIP == "" {
		return s
	}
	s.HTTP = rewrite(s.HTTP, hostAccessIP)
	s.HTTPS = rewrite(s.HTTPS, hostAccessIP)
	return s
}

func rewrite(raw, ip string) string {
	u, err := parse(raw)
	if err != nil || !isLoopback(u.Hostname()) {
		return raw
	}
	if p := u.Port(); p != "" {
		u.Host = net.JoinHostPort(ip, p)
	} else {
		u.Host = ip
	}
	return u.String()
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Mask hides the user and password in a proxy URL, for status and logs.
func Mask(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			// Not a URL we can take apart: hide everything up to the @.
			if j := strings.Index(raw, "://"); j >= 0 && j < i {
				return raw[:j+3] + "***@" + raw[i+1:]
			}
			return "***@" + raw[i+1:]
		}
		return raw
	}
	u.User = url.User("***")
	return strings.Replace(u.String(), "%2A%2A%2A@", "***@", 1)
}

// Masked is s with credentials hidden.
func (s Settings) Masked() Settings {
	s.HTTP, s.HTTPS = Mask(s.HTTP), Mask(s.HTTPS)
	return s
}

// Env is s as the conventional variables, in both cases: some tools read
// only one of them.
func (s Settings) Env() map[string]string {
	env := map[string]string{}
	for name, v := range map[string]string{"HTTP_PROXY": s.HTTP, "HTTPS_PROXY": s.HTTPS, "NO_PROXY": s.NoProxy} {
		if v != "" {
			env[name] = v
			env[strings.ToLower(name)] = v
		}
	}
	return env
}
