// Package guestos is what every guest feature shares: the system it runs
// on (tools, clock, host name, mounts) behind an interface tests fake, the
// root its files live under, and the mount table.
package guestos
