package proxy

// System is nil on Linux: there is no one system setting beyond the
// environment, which Resolve reads first.
var System func() (Settings, string, error)
