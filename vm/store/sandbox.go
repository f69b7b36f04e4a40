package store

// EgressLogPath is where a sandbox's host agent appends the connections
// and DNS names its egress policy refused (`vmdock sandbox log`).
func (i *Instance) EgressLogPath() string { return i.path("egress.log") }

// SandboxBasePath is what a sandbox's workspace and its guest copy last
// agreed on (package review's base).
func (i *Instance) SandboxBasePath() string { return i.path("sandbox-base.json") }

// SandboxCAPaths are a sandbox's CA certificate (which its guest trusts
// for its secrets' hosts) and key.
func (i *Instance) SandboxCAPaths() (cert, key string) {
	return i.path("sandbox-ca.pem"), i.path("sandbox-ca-key.pem")
}
