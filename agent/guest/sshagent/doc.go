// Package sshagent serves an ssh-agent socket in the guest, usable by
// every container, and relays each connection to the host's agent.
package sshagent
