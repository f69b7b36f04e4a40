package store

// EgressLogPath is where a sandbox's host agent appends the connections
// and DNS names its egress policy refused (`vmdock sandbox log`).
func (i *Instance) EgressLogPath() string { return i.path("egress.log") }
