package main

import "github.com/vmdock/vmdock/vm/control"

// sshAgentLine says where containers find the host's SSH agent, and which
// host socket it is, or why they do not.
func sshAgentLine(a *control.SSHAgentStatus) string {
	if !a.On {
		return "off (" + a.Off + ")"
	}
	return a.GuestSocket + " -> " + a.HostSocket + " (the host's SSH_AUTH_SOCK at start)"
}
