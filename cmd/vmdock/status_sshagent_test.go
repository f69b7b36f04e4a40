package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmdock/vmdock/vm/control"
	"github.com/vmdock/vmdock/vm/instance"
)

func TestStatusShowsSSHAgentForwarding(t *testing.T) {
	for _, tt := range []struct {
		agent *control.SSHAgentStatus
		want  string
	}{
		{&control.SSHAgentStatus{On: true, HostSocket: "/tmp/ssh-x/agent.1", GuestSocket: "/run/host-services/ssh-auth.sock"},
			"ssh agent: /run/host-services/ssh-auth.sock -> /tmp/ssh-x/agent.1 (the host's SSH_AUTH_SOCK at start)"},
		{&control.SSHAgentStatus{Off: "sshAgent is false"}, "ssh agent: off (sshAgent is false)"},
	} {
		var out bytes.Buffer
		s := statusJSON{Profile: "default", Status: instance.StateRunning, HostAgent: &control.Status{SSHAgent: tt.agent}}
		if err := writeStatusText(&out, s, instance.LiveStatus{State: instance.StateRunning}); err != nil {
			t.Fatal(err)
		}
		var got string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "ssh agent:") {
				got = strings.Join(strings.Fields(l), " ")
			}
		}
		if got != tt.want {
			t.Errorf("status line %q, want %q", got, tt.want)
		}
	}
}
