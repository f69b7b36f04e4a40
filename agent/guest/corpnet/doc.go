// Package corpnet puts the host's corporate network into the guest: its CA
// certificates in the trust store (the bundle edited in place, the
// distribution's script only when needed) and its proxy in the daemons'
// drop-ins, apt and /etc/environment.
package corpnet
