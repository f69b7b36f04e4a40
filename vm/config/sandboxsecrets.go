package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/vmdock/vmdock/network/egress"
)

// SandboxSecret is a credential the host agent adds to the sandbox's
// HTTPS requests to Host, read from the host's environment variable Env
// at start: the guest never holds it.
type SandboxSecret struct {
	Name string `yaml:"name" json:"name"`
	Env  string `yaml:"env" json:"env"`
	Host string `yaml:"host" json:"host"`
	// Header is where the credential goes; empty: Authorization, as
	// "Bearer <value>" unless the value has a scheme of its own.
	Header string `yaml:"header,omitempty" json:"header,omitempty"`
}

// SecretFlagGrammar is the form of --secret, quoted in its errors.
const SecretFlagGrammar = "NAME=ENV@HOST: a name, the host environment variable holding the credential, and the DNS name of the HTTPS host it is for"

var (
	secretName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	headerToken = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
)

// ParseSecretFlag parses one --secret NAME=ENV@HOST.
func ParseSecretFlag(s string) (SandboxSecret, error) {
	name, rest, ok1 := strings.Cut(s, "=")
	env, host, ok2 := strings.Cut(rest, "@")
	if !ok1 || !ok2 {
		return SandboxSecret{}, fmt.Errorf("--secret %q; accepted: %s", s, SecretFlagGrammar)
	}
	sec := SandboxSecret{Name: name, Env: env, Host: host}
	if err := sec.check(); err != nil {
		return SandboxSecret{}, err
	}
	return sec, nil
}

func (s SandboxSecret) check() error {
	switch {
	case !secretName.MatchString(s.Name):
		return fmt.Errorf("sandbox secret %q: the name; accepted: letters, digits, '_', '.' and '-'", s.Name)
	case !envKey.MatchString(s.Env):
		return fmt.Errorf("sandbox secret %s: env %q; accepted: an environment variable name", s.Name, s.Env)
	case s.Header != "" && !headerToken.MatchString(s.Header):
		return fmt.Errorf("sandbox secret %s: header %q; accepted: an HTTP header name", s.Name, s.Header)
	}
	r, err := egress.ParseRule(s.Host)
	if err != nil || r.Name == "" || r.Wildcard || r.Port != 0 {
		return fmt.Errorf("sandbox secret %s: host %q; accepted: one DNS name (no wildcard, no port: HTTPS on 443)", s.Name, s.Host)
	}
	return nil
}

// HeaderName is where s's credential goes.
func (s SandboxSecret) HeaderName() string {
	if s.Header == "" {
		return "Authorization"
	}
	return s.Header
}

// HeaderValue is the header's value for credential v.
func (s SandboxSecret) HeaderValue(v string) string {
	if s.Header == "" && !strings.Contains(v, " ") {
		return "Bearer " + v
	}
	return v
}

// CheckSecretsSet says, one line each, which secrets' variables getenv
// does not have: the host agent reads them at start.
func (c Config) CheckSecretsSet(getenv func(string) string) []error {
	if c.Sandbox == nil {
		return nil
	}
	var errs []error
	for _, s := range c.Sandbox.Secrets {
		if getenv(s.Env) == "" {
			errs = append(errs, fmt.Errorf("sandbox secret %s: the variable %s is not set; accepted: a secret whose variable holds the credential in the environment vmdock starts from", s.Name, s.Env))
		}
	}
	return errs
}

func (c Config) validateSecrets() []error {
	var errs []error
	seen := map[string]bool{}
	for _, s := range c.Sandbox.Secrets {
		if err := s.check(); err != nil {
			errs = append(errs, err)
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("sandbox secret %s: named twice; accepted: one entry per name", s.Name))
		}
		seen[s.Name] = true
	}
	return errs
}
