//go:build e2e

package e2e

import "testing"

// checkMigrate needs a dockerd on the host to migrate from, which only a
// Linux host runs (the e2e Linux runs check it).
func checkMigrate(t *testing.T, e *env) {
	e.timed("vmdock migrate from a host dockerd", func(t *testing.T) {
		t.Skip("the source dockerd runs on a Linux host only")
	})
}
