package config

// SSHAgentSocket is the host's agent socket the guest is offered: h's
// SSH_AUTH_SOCK unless sshAgent is false. "" means no forwarding; whether
// the path really is an agent the host agent finds out when it starts.
func (c Config) SSHAgentSocket(h Host) string {
	if c.SSHAgent != nil && !*c.SSHAgent {
		return ""
	}
	return h.SSHAuthSock
}
