package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/vmdock/vmdock/internal/keychain"
	"github.com/vmdock/vmdock/network/egress"
)

// SandboxSecret is a credential the host agent adds to the sandbox's
// HTTPS requests to Host, read at start from the host: its environment
// variable Env, or the generic password of service Keychain in its
// keychain (exactly one of the two). The guest never holds it.
type SandboxSecret struct {
	Name     string `yaml:"name" json:"name"`
	Env      string `yaml:"env,omitempty" json:"env,omitempty"`
	Keychain string `yaml:"keychain,omitempty" json:"keychain,omitempty"`
	// Account picks the keychain item where several share the service.
	Account string `yaml:"account,omitempty" json:"account,omitempty"`
	Host    string `yaml:"host" json:"host"`
	// Header is where the credential goes; empty: Authorization, as
	// "Bearer <value>" unless the value has a scheme of its own.
	Header string `yaml:"header,omitempty" json:"header,omitempty"`
}

// SecretFlagGrammar is the form of --secret, quoted in its errors.
const SecretFlagGrammar = "NAME=ENV@HOST or NAME=keychain:SERVICE@HOST: a name, where the credential is (a host environment variable, or the service of a generic password in the host's keychain), and the DNS name of the HTTPS host it is for"

// keychainPrefix marks --secret's keychain source; an environment
// variable's name never holds a colon.
const keychainPrefix = "keychain"

var (
	secretName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	headerToken = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
	// keychainName is what the keychain tools take as a service or an
	// account, never as one of their options.
	keychainName = regexp.MustCompile(`^[^-\s\p{Cc}][^\p{Cc}]*$`)
)

// ParseSecretFlag parses one --secret NAME=ENV@HOST or
// NAME=keychain:SERVICE@HOST (a service may hold an @: the host is what
// follows the last one).
func ParseSecretFlag(s string) (SandboxSecret, error) {
	name, rest, ok := strings.Cut(s, "=")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return SandboxSecret{}, fmt.Errorf("--secret %q; accepted: %s", s, SecretFlagGrammar)
	}
	sec := SandboxSecret{Name: name, Host: rest[at+1:]}
	switch kind, service, hasKind := strings.Cut(rest[:at], ":"); {
	case !hasKind:
		sec.Env = kind
	case kind == keychainPrefix && service == "":
		return SandboxSecret{}, fmt.Errorf("--secret %q: an empty keychain service; accepted: keychain:SERVICE, the service of a generic password in the host's keychain", s)
	case kind == keychainPrefix:
		sec.Keychain = service
	default:
		return SandboxSecret{}, fmt.Errorf("--secret %q: unknown source %q; accepted: ENV (a host environment variable) or keychain:SERVICE", s, kind+":")
	}
	if err := sec.check(); err != nil {
		return SandboxSecret{}, err
	}
	return sec, nil
}

func (s SandboxSecret) check() error {
	switch {
	case !secretName.MatchString(s.Name):
		return fmt.Errorf("sandbox secret %q: the name; accepted: letters, digits, '_', '.' and '-'", s.Name)
	case s.Env != "" && s.Keychain != "", s.Env == "" && s.Keychain == "":
		return fmt.Errorf("sandbox secret %s: env %q and keychain %q; accepted: exactly one of the two, where the credential is", s.Name, s.Env, s.Keychain)
	case s.Keychain == "" && !envKey.MatchString(s.Env):
		return fmt.Errorf("sandbox secret %s: env %q; accepted: an environment variable name", s.Name, s.Env)
	case s.Env == "" && !keychainName.MatchString(s.Keychain):
		return fmt.Errorf("sandbox secret %s: keychain %q; accepted: a keychain service name (no control characters, no leading '-' or space)", s.Name, s.Keychain)
	case s.Account != "" && (s.Keychain == "" || !keychainName.MatchString(s.Account)):
		return fmt.Errorf("sandbox secret %s: account %q; accepted: with keychain only, an account name (no control characters, no leading '-' or space)", s.Name, s.Account)
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

// SecretSource is where the host's credentials come from.
type SecretSource struct {
	Getenv func(string) string
	// FindKeychain checks that an item exists, on macOS without reading
	// its password (which may ask the user); ReadKeychain reads it.
	FindKeychain func(keychain.Item) error
	ReadKeychain func(keychain.Item) (string, error)
}

// HostSecrets is this process's environment and the host's keychain.
var HostSecrets = SecretSource{Getenv: os.Getenv, FindKeychain: keychain.Find, ReadKeychain: keychain.Read}

// read is s's credential from src; with checkOnly, it checks that there is
// one and returns "".
func (src SecretSource) read(s SandboxSecret, checkOnly bool) (string, error) {
	if s.Keychain == "" {
		v := src.Getenv(s.Env)
		if v == "" {
			return "", fmt.Errorf("sandbox secret %s: the variable %s is not set; accepted: a secret whose variable holds the credential in the environment vmdock starts from", s.Name, s.Env)
		}
		return v, nil
	}
	item := keychain.Item{Service: s.Keychain, Account: s.Account}
	var v string
	var err error
	if checkOnly {
		err = src.FindKeychain(item)
	} else {
		v, err = src.ReadKeychain(item)
	}
	switch {
	case errors.Is(err, keychain.ErrNotFound):
		account := ""
		if s.Account != "" {
			account = fmt.Sprintf(" and account %q", s.Account)
		}
		return "", fmt.Errorf("sandbox secret %s: the keychain holds no item with service %q%s; accepted: a generic password stored there (%s)", s.Name, s.Keychain, account, keychain.AddHint(item))
	case err != nil:
		return "", fmt.Errorf("sandbox secret %s: %w", s.Name, err)
	case !checkOnly && v == "":
		return "", fmt.Errorf("sandbox secret %s: the keychain item with service %q is empty; accepted: an item holding the credential", s.Name, s.Keychain)
	}
	return v, nil
}

// CheckSecrets says, one line each, which secrets src does not have: the
// host agent reads them at start.
func (c Config) CheckSecrets(src SecretSource) []error {
	if c.Sandbox == nil {
		return nil
	}
	var errs []error
	for _, s := range c.Sandbox.Secrets {
		if _, err := src.read(s, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// ReadSecrets is every secret's credential from src, by name.
func (c Config) ReadSecrets(src SecretSource) (map[string]string, error) {
	values := map[string]string{}
	var errs []error
	if c.Sandbox == nil {
		return values, nil
	}
	for _, s := range c.Sandbox.Secrets {
		v, err := src.read(s, false)
		if err != nil {
			errs = append(errs, err)
		}
		values[s.Name] = v
	}
	return values, errors.Join(errs...)
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
