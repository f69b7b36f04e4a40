// Package config is an instance's configuration: the typed struct, its
// defaults for a given Host, the YAML form it is loaded from and saved to,
// and the validation every command runs before it changes anything. It
// probes nothing: the Host it reads is detected once by the command line.
package config
