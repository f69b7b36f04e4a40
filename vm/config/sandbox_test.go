package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/mounts"
	"github.com/vmdock/vmdock/vm/driver"
)

// A profile's sandbox keys make it a sandbox whatever else the file says:
// the workspace is its only folder (synced host to guest), no SSH agent,
// no host CAs, the host agent's stack in user mode.
func TestSandboxYAMLOverridesWhatWouldLeak(t *testing.T) {
	ws := t.TempDir()
	yaml := "sandbox:\n  workspace: " + ws + "\n  allow: [github.com:443, '*.npmjs.org']\n" +
		"mounts:\n  - location: /\n    writable: true\nsshAgent: true\nhostCACerts: true\ncaCerts: [/etc/ca.pem]\nnetwork:\n  mode: isolated\n  stack: slirp\n  dns: [8.8.8.8]\n"
	withAgent := linuxHost
	withAgent.SSHAuthSock = "/tmp/agent.sock"
	c, err := Parse([]byte(yaml), withAgent)
	if err != nil {
		t.Fatal(err)
	}
	c.Normalize()
	if err := c.ValidateOn(withAgent); err != nil {
		t.Fatal(err)
	}
	want := []Mount{{Location: ws, GuestPath: ws, Writable: true, Mode: mounts.ModeSync}}
	if len(c.Mounts) != 1 || c.Mounts[0].Location != ws || c.Mounts[0].GuestPath != ws || !c.Mounts[0].IsSync() {
		t.Errorf("mounts = %+v, want %+v", c.Mounts, want)
	}
	if c.SSHAgentSocket(withAgent) != "" || c.HostCACerts || len(c.CACerts) > 0 {
		t.Errorf("sshAgent %q, hostCACerts %v, caCerts %v; want all off", c.SSHAgentSocket(withAgent), c.HostCACerts, c.CACerts)
	}
	if c.Network.Stack != driver.NetStackGvisor || c.Network.Mode != driver.NetworkUser || len(c.Network.DNS) > 0 {
		t.Errorf("network %s/%s dns %v, want gvisor/user, the stack's DNS", c.Network.Stack, c.Network.Mode, c.Network.DNS)
	}
	if syncs := c.SyncMounts(); len(syncs) != 1 || !syncs[0].HostToGuest {
		t.Errorf("sync mounts %+v, want the workspace host to guest", syncs)
	}
	p, err := c.EgressPolicy(nil)
	if err != nil || p == nil || len(p.Rules()) != 2 {
		t.Errorf("egress policy %v, %v; want the two rules", p, err)
	}
	plain := Default(linuxHost)
	if p, _ := plain.EgressPolicy(nil); p != nil || plain.SyncMounts() != nil {
		t.Error("an instance that is no sandbox has an egress policy or host-to-guest syncs")
	}
}

func TestSandboxBadInput(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home folder")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for ws, want := range map[string]string{
		"/no/such/folder": "does not exist", "/": "is /", home: "home folder", "~": "home folder",
		filepath.Dir(home): "home folder", file: "not a folder", "": "empty",
	} {
		if _, err := CheckWorkspace(ws); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "accepted:") || strings.Contains(err.Error(), "\n") {
			t.Errorf("workspace %q: %v; want one line saying %q and what is accepted", ws, err, want)
		}
	}
	c := Default(linuxHost)
	c.Sandbox = &SandboxConfig{Workspace: t.TempDir(), Allow: []string{"github.com", "https://evil.test/x"}}
	c.FillDefaults(linuxHost)
	c.Normalize()
	err = c.ValidateOn(linuxHost)
	if err == nil || !strings.Contains(err.Error(), `sandbox.allow: allow entry "https://evil.test/x": not a host`) {
		t.Fatalf("a bad allow entry: %v", err)
	}
}

func TestSandboxSecrets(t *testing.T) {
	s, err := ParseSecretFlag("gh=GITHUB_TOKEN@api.github.com")
	if err != nil || s != (SandboxSecret{Name: "gh", Env: "GITHUB_TOKEN", Host: "api.github.com"}) {
		t.Fatalf("ParseSecretFlag: %+v, %v", s, err)
	}
	if s.HeaderName() != "Authorization" || s.HeaderValue("abc") != "Bearer abc" || s.HeaderValue("token abc") != "token abc" {
		t.Error("the default header is Authorization, Bearer unless the value has its own scheme")
	}
	if named := (SandboxSecret{Header: "x-api-key"}); named.HeaderValue("abc") != "abc" {
		t.Error("a named header carries the value as it is")
	}
	for _, bad := range []string{"gh", "gh=TOKEN", "=TOKEN@api.github.com", "gh=1X@api.github.com", "gh=T@*.github.com", "gh=T@api.github.com:8443", "gh=T@198.18.0.1"} {
		if _, err := ParseSecretFlag(bad); err == nil || !strings.Contains(err.Error(), "accepted:") {
			t.Errorf("ParseSecretFlag(%q) = %v; want an error saying what is accepted", bad, err)
		}
	}
	c := Default(linuxHost)
	c.Sandbox = &SandboxConfig{Workspace: t.TempDir(), Secrets: []SandboxSecret{
		{Name: "a", Env: "A", Host: "a.test.example"}, {Name: "a", Env: "B", Host: "b.test.example", Header: "bad header"},
	}}
	c.FillDefaults(linuxHost)
	c.Normalize()
	err = c.ValidateOn(linuxHost)
	if err == nil || !strings.Contains(err.Error(), "named twice") || !strings.Contains(err.Error(), `header "bad header"`) {
		t.Fatalf("bad secrets: %v", err)
	}
	env := SecretSource{Getenv: func(k string) string { return map[string]string{"A": "x"}[k] }}
	if errs := c.CheckSecrets(env); len(errs) != 1 || !strings.Contains(errs[0].Error(), "variable B is not set") {
		t.Fatalf("CheckSecrets: %v", errs)
	}
}
