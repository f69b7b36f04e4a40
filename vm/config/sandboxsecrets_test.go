package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/internal/keychain"
)

// --secret's keychain source: the service (an @ in it too, the host
// follows the last), and what it refuses, one line saying what is
// accepted.
func TestParseSecretFlagKeychain(t *testing.T) {
	for flag, want := range map[string]SandboxSecret{
		"gh=keychain:gh:github.com@api.github.com":        {Name: "gh", Keychain: "gh:github.com", Host: "api.github.com"},
		"api=keychain:me@example.com@api.test.example":    {Name: "api", Keychain: "me@example.com", Host: "api.test.example"},
		"gh=GITHUB_TOKEN@api.github.com":                  {Name: "gh", Env: "GITHUB_TOKEN", Host: "api.github.com"},
		"x=keychain:service with spaces@api.test.example": {Name: "x", Keychain: "service with spaces", Host: "api.test.example"},
	} {
		if got, err := ParseSecretFlag(flag); err != nil || got != want {
			t.Errorf("ParseSecretFlag(%q) = %+v, %v; want %+v", flag, got, err, want)
		}
	}
	for flag, want := range map[string]string{
		"gh=keychain:@api.github.com":     `an empty keychain service`,
		"gh=vault:gh@api.github.com":      `unknown source "vault:"`,
		"gh=Keychain:gh@api.github.com":   `unknown source "Keychain:"`,
		"gh=keychain:-w@api.github.com":   `keychain "-w"`,
		"gh=keychain:a\tb@api.github.com": `keychain "a\tb"`,
		"gh=keychain:gh@*.github.com":     `host "*.github.com"`,
		"gh=keychain:gh":                  `--secret "gh=keychain:gh"`,
	} {
		_, err := ParseSecretFlag(flag)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "accepted:") || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseSecretFlag(%q) = %v; want one line with %q and what is accepted", flag, err, want)
		}
	}
}

// The YAML keys: keychain (and account) beside env, exactly one source;
// a keychain secret is saved without an env key.
func TestSandboxSecretsYAMLKeychain(t *testing.T) {
	ws := t.TempDir()
	base := "sandbox:\n  workspace: " + ws + "\n  secrets:\n"
	c, err := Parse([]byte(base+"  - {name: gh, keychain: gh:github.com, account: me, host: api.github.com}\n"), linuxHost)
	if err != nil {
		t.Fatal(err)
	}
	c.Normalize()
	if err := c.ValidateOn(linuxHost); err != nil {
		t.Fatal(err)
	}
	if got := c.Sandbox.Secrets[0]; got != (SandboxSecret{Name: "gh", Keychain: "gh:github.com", Account: "me", Host: "api.github.com"}) {
		t.Fatalf("parsed %+v", got)
	}
	out, err := c.Marshal()
	_, saved, _ := strings.Cut(string(out), "secrets:")
	if err != nil || strings.Contains(saved, "env:") || !strings.Contains(saved, "keychain: gh:github.com") {
		t.Fatalf("saved: %v\n%s", err, out)
	}
	for entry, want := range map[string]string{
		"{name: gh, env: GH, keychain: gh, host: api.github.com}": `env "GH" and keychain "gh"; accepted: exactly one`,
		"{name: gh, host: api.github.com}":                        `env "" and keychain ""; accepted: exactly one`,
		"{name: gh, env: GH, account: me, host: api.github.com}":  `account "me"; accepted: with keychain only`,
		"{name: gh, vault: gh, host: api.github.com}":             "vault",
	} {
		c, err := Parse([]byte(base+"  - "+entry+"\n"), linuxHost)
		if err == nil {
			c.Normalize()
			err = c.ValidateOn(linuxHost)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", entry, err, want)
		}
	}
}

// fakeKeychain holds one item, service gh:github.com, and fails for
// service broken as a keychain tool would; it counts what was read.
type fakeKeychain struct{ finds, reads int }

func (f *fakeKeychain) source() SecretSource {
	lookup := func(it keychain.Item) (string, error) {
		switch it.Service {
		case "gh:github.com":
			return "tok-keychain", nil
		case "empty":
			return "", nil
		case "broken":
			return "", errors.New("the keychain source needs secret-tool on Linux, which is not on PATH")
		}
		return "", keychain.ErrNotFound
	}
	return SecretSource{
		Getenv:       func(k string) string { return map[string]string{"GH": "tok-env"}[k] },
		FindKeychain: func(it keychain.Item) error { f.finds++; _, err := lookup(it); return err },
		ReadKeychain: func(it keychain.Item) (string, error) { f.reads++; return lookup(it) },
	}
}

// Secrets are read from their source; a check only asks the keychain
// whether the item is there; what is missing or failed is one line that
// names the secret (and the service, and how to store it).
func TestReadSecretsFromEnvAndKeychain(t *testing.T) {
	var fake fakeKeychain
	c := Config{Sandbox: &SandboxConfig{Secrets: []SandboxSecret{
		{Name: "env", Env: "GH", Host: "a.test.example"}, {Name: "kc", Keychain: "gh:github.com", Host: "b.test.example"},
	}}}
	if errs := c.CheckSecrets(fake.source()); len(errs) != 0 || fake.finds != 1 || fake.reads != 0 {
		t.Fatalf("CheckSecrets: %v (finds %d, reads %d; want 1 find, no read)", errs, fake.finds, fake.reads)
	}
	values, err := c.ReadSecrets(fake.source())
	if err != nil || values["env"] != "tok-env" || values["kc"] != "tok-keychain" {
		t.Fatalf("ReadSecrets: %v, %v", values, err)
	}
	c.Sandbox.Secrets = []SandboxSecret{
		{Name: "gone", Keychain: "vmdock-none", Account: "me", Host: "a.test.example"},
		{Name: "tool", Keychain: "broken", Host: "b.test.example"},
		{Name: "blank", Keychain: "empty", Host: "c.test.example"},
	}
	errs := c.CheckSecrets(fake.source())
	if len(errs) != 2 {
		t.Fatalf("CheckSecrets: %v; want the missing item and the failed tool", errs)
	}
	_, err = c.ReadSecrets(fake.source())
	lines := strings.Split(err.Error(), "\n")
	for i, want := range []string{
		`sandbox secret gone: the keychain holds no item with service "vmdock-none" and account "me"; accepted: a generic password stored there (` + keychain.AddHint(keychain.Item{Service: "vmdock-none", Account: "me"}) + ")",
		"sandbox secret tool: the keychain source needs secret-tool on Linux, which is not on PATH",
		`sandbox secret blank: the keychain item with service "empty" is empty; accepted: an item holding the credential`,
	} {
		if i >= len(lines) || lines[i] != want {
			t.Errorf("ReadSecrets error line %d:\n%v\nwant\n%s", i, err, want)
		}
	}
}
