// Package inject adds a sandbox's credentials to its HTTPS requests on
// the way out, so the guest never holds them: the network stack hands it
// the guest's TLS connections to a secret's host, it answers them with a
// certificate from the sandbox's own CA (name-constrained to the secrets'
// hosts, so the guest trusts it for nothing else), sets the secret's
// header on every request and forwards it over TLS to the real host.
// Connections to any other host pass through untouched.
package inject
