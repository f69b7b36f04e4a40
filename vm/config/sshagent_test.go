package config

import (
	"strings"
	"testing"
)

func TestSSHAgentSocketFollowsTheHostUnlessTurnedOff(t *testing.T) {
	withAgent := linuxHost
	withAgent.SSHAuthSock = "/tmp/ssh-XXXX/agent.1"
	for _, tt := range []struct {
		name string
		yaml string
		host Host
		want string
	}{
		{"left out, agent on the host", "", withAgent, withAgent.SSHAuthSock},
		{"left out, no agent on the host", "", linuxHost, ""},
		{"true", "sshAgent: true\n", withAgent, withAgent.SSHAuthSock},
		{"true, no agent on the host", "sshAgent: true\n", linuxHost, ""},
		{"false", "sshAgent: false\n", withAgent, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), tt.host)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.SSHAgentSocket(tt.host); got != tt.want {
				t.Fatalf("SSHAgentSocket = %q, want %q", got, tt.want)
			}
		})
	}
}

// A first start from a shell without an agent must not pin forwarding off
// for every later start: the default is not written to the config, a
// choice the user made is.
func TestSSHAgentDefaultIsNotSaved(t *testing.T) {
	b, err := Default(linuxHost).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "sshAgent") {
		t.Fatalf("the default config names sshAgent:\n%s", b)
	}
	c, err := Parse([]byte("sshAgent: false\n"), linuxHost)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = c.Marshal(); err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b, Host{SSHAuthSock: "/tmp/agent"})
	if err != nil {
		t.Fatal(err)
	}
	if again.SSHAgent == nil || *again.SSHAgent {
		t.Fatalf("sshAgent: false did not survive a save:\n%s", b)
	}
}

func TestSSHAgentMustBeABool(t *testing.T) {
	_, err := Parse([]byte("sshAgent: maybe\n"), linuxHost)
	if err == nil || !strings.Contains(err.Error(), "maybe") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("sshAgent: maybe gave %v; want one line naming the value", err)
	}
}
